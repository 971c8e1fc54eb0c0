// AudioStream: decode -> check -> downmix -> resample, one block per read().
// Called by the batch reader thread and by serve. Owns the AudioDecoder left
// open by validation (and, for a file in memory, a reference to its bytes) and
// the two block buffers (interleaved and mono), so memory stays one block (and
// one codec frame) for any length: the encoded bytes are never decoded ahead
// of read().
#include "audio/audio_stream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

namespace corepool {

namespace {

AudioSource memory_source(const std::string& name,
                          const std::shared_ptr<const std::string>& bytes) {
  if (!bytes) throw std::invalid_argument("AudioStream: " + name + ": no buffer (null)");
  return AudioSource::memory(name, *bytes);
}

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

}  // namespace

AudioStream::AudioStream(const std::string& path, int target_rate, size_t block_frames, int audio_stream)
    : AudioStream(AudioSource::file(path), nullptr, target_rate, block_frames, audio_stream) {}

AudioStream::AudioStream(const std::string& name, std::shared_ptr<const std::string> bytes,
                         int target_rate, size_t block_frames)
    : AudioStream(memory_source(name, bytes), bytes, target_rate, block_frames, 0) {}

AudioStream::AudioStream(const AudioSource& pipe, int target_rate, size_t block_frames, int audio_stream)
    : AudioStream(pipe, nullptr, target_rate, block_frames, audio_stream) {
  if (!pipe.pipe) throw std::invalid_argument("AudioStream: " + pipe.name + ": not a pipe");
}

AudioStream::AudioStream(const AudioSource& source, std::shared_ptr<const std::string> bytes,
                         int target_rate, size_t block_frames, int audio_stream)
    : name_(source.name), bytes_(std::move(bytes)), target_rate_(target_rate), block_frames_(block_frames) {
  if (block_frames_ == 0) throw std::invalid_argument("AudioStream: block_frames must be > 0");
  ValidatedAudio validated = open_validated(source, audio_stream);
  info_ = validated.info;
  decoder_ = std::move(validated.decoder);
  interleaved_.reserve(block_frames_ * size_t(decoder_->channels()));
  mono_.resize(block_frames_);
}

AudioStream::~AudioStream() = default;

// Loops until something is appended: a first block may resample to nothing
// (the filter holds samples back), and "false" must only ever mean the end.
bool AudioStream::read(std::vector<float>& out) {
  const size_t before = out.size();
  const size_t channels = size_t(decoder_->channels());
  while (!done_ && out.size() == before) {
    const size_t got = fill_block();
    if (got == 0) {
      finish_stream();
      if (resampler_) resampler_->process(mono_.data(), 0, true, out);
      done_ = true;
      break;
    }
    check_finite(got);
    downmix(got);
    interleaved_.erase(interleaved_.begin(), interleaved_.begin() + long(got * channels));
    frames_read_ += int64_t(got);
    resampler_->process(mono_.data(), got, false, out);
  }
  return out.size() > before;
}

// Codec frames do not line up with blocks: decodes frames until a whole block
// is buffered (or the data ends); the rest of the last frame waits for the next.
size_t AudioStream::fill_block() {
  const size_t channels = size_t(decoder_->channels());
  while (!decoded_all_ && interleaved_.size() < block_frames_ * channels) {
    if (decoder_->read(interleaved_) == 0) decoded_all_ = true;
  }
  trim_padding();
  const size_t frames = std::min(block_frames_, interleaved_.size() / channels);
  if (frames > 0 && !resampler_) {
    const int rate = decoder_->decoded_rate();
    if (rate < kMinSampleRate || rate > kMaxSampleRate) {
      throw AudioError(name_, "decoded sample rate " + std::to_string(rate) + " Hz is outside " +
                                  std::to_string(kMinSampleRate) + ".." + std::to_string(kMaxSampleRate) + " Hz");
    }
    try {
      resampler_ = std::make_unique<Resampler>(rate, target_rate_);
    } catch (const std::runtime_error& e) {
      throw AudioError(name_, e.what(), AudioErrorKind::kInvalid);
    }
  }
  return frames;
}

// The header's count is at the header's rate; HE-AAC decodes at twice it.
int64_t AudioStream::claimed_frames() const {
  const int rate = decoder_->decoded_rate();
  if (rate == info_.sample_rate || info_.sample_rate <= 0 || rate <= 0) return info_.frames;
  return int64_t(double(info_.frames) * rate / info_.sample_rate);
}

// A lossy decoder may run past the length the container states (a Vorbis
// stream's last granule, an MP4's track duration): its last frame's padding.
// If the data ends within frames_slack of the stated end, the excess is
// dropped; if more comes, the header was wrong and everything is kept.
void AudioStream::trim_padding() {
  if (!info_.frames_exact || info_.frames_slack == 0) return;
  const int64_t channels = decoder_->channels();
  const int64_t left = claimed_frames() - frames_read_;  // what the header still promises
  auto buffered = [&] { return int64_t(interleaved_.size()) / channels; };
  if (buffered() <= left) return;
  while (!decoded_all_ && buffered() - left <= info_.frames_slack) {
    if (decoder_->read(interleaved_) == 0) decoded_all_ = true;
  }
  if (decoded_all_ && buffered() - left <= info_.frames_slack) {
    interleaved_.resize(size_t(std::max<int64_t>(left, 0) * channels));
  }
}

// End of data: fewer frames than the header promised, or data that ended in a
// damaged packet, means the file is damaged, even though every block so far was fine.
void AudioStream::finish_stream() const {
  if (frames_read_ == 0 && decoder_->input().weakly_recognised()) {
    throw AudioError(name_, "not an audio file (format not recognised)", AudioErrorKind::kNotAudio);
  }
  if (frames_read_ == 0 && decoder_->input().is_pipe() && decoder_->input().pipe_bytes() == 0) {
    throw AudioError(name_, "empty (no data on standard input)", AudioErrorKind::kInvalid);
  }
  if (frames_read_ == 0) throw AudioError(name_, "no audio frames (empty)", AudioErrorKind::kInvalid);
  const int rate = decoder_->decoded_rate();
  const int64_t claimed = claimed_frames();
  // After a skipped stretch the count is an estimate (an MP3's bit reservoir
  // loses frames after the damage too): only a damaged end is truncation then.
  // A refused last packet (listed, at_end) ends the count without making it one.
  const auto& skipped = decoder_->skipped();
  const bool estimated = std::any_of(skipped.begin(), skipped.end(), [](const SkippedStretch& s) { return !s.at_end; });
  if (info_.frames_exact && !estimated && frames_read_ + info_.frames_slack < claimed) {
    throw AudioError(name_, "truncated: header says " + std::to_string(claimed) +
                                " frames, read " + std::to_string(frames_read_),
                     AudioErrorKind::kInvalid);
  }
  if (decoder_->ended_damaged()) {
    throw AudioError(name_, "truncated: the data ends in a damaged packet at t = " +
                                fixed(double(frames_read_) / rate, 2) + " s (" + decoder_->end_reason() + ")",
                     AudioErrorKind::kInvalid);
  }
}

// Position is the frame index in the file, so a user can find it in an editor.
// Float files are not normalised by the decoder: a finite sample near FLT_MAX
// would overflow to Inf in the downmix or the resampler, so magnitudes past
// kMaxSampleMagnitude (60 dB over full scale) are refused like NaN and Inf.
void AudioStream::check_finite(size_t frames) const {
  constexpr float kMaxSampleMagnitude = 1000.0f;
  const size_t channels = size_t(info_.channels);
  const size_t n = frames * channels;
  // One pass without a branch first (NaN and +-Inf fail the comparison too):
  // the loop that names the sample, run on every sample, took 4 % of the
  // supervisor's cpu on 200 WAV files of 3 s, this pass a third of that
  // (perf, Intel Xeon with AMX).
  bool all_good = true;
  for (size_t i = 0; i < n; ++i) all_good &= std::fabs(interleaved_[i]) <= kMaxSampleMagnitude;
  if (all_good) return;
  for (size_t i = 0; i < n; ++i) {
    const float v = interleaved_[i];
    if (std::isfinite(v) && std::fabs(v) <= kMaxSampleMagnitude) continue;
    std::string what = std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
    if (std::isfinite(v)) {
      char text[128];
      std::snprintf(text, sizeof(text), "%g, beyond +-%g (float audio is expected within +-1)", double(v),
                    double(kMaxSampleMagnitude));
      what = text;
    }
    throw AudioError(name_, "sample " + std::to_string(frames_read_ + int64_t(i / channels)) +
                                " is " + what,
                     AudioErrorKind::kInvalid);
  }
}

// Mono by averaging channels: keeps the level of a signal present on all
// channels, where summing would clip it.
void AudioStream::downmix(size_t frames) {
  const size_t channels = size_t(info_.channels);
  if (channels == 1) {
    std::copy(interleaved_.begin(), interleaved_.begin() + long(frames), mono_.begin());
    return;
  }
  const float scale = 1.0f / float(channels);
  for (size_t f = 0; f < frames; ++f) {
    const float* frame = &interleaved_[f * channels];
    float sum = 0.0f;
    for (size_t c = 0; c < channels; ++c) sum += frame[c];
    mono_[f] = sum * scale;
  }
}

}  // namespace corepool
