// AudioStream: decode -> check -> downmix -> resample, one block per read().
// Called by the batch reader thread and by serve. Owns the SoundFile handle left
// open by validation (and, for a file in memory, a reference to its bytes) and
// the two block buffers (interleaved and mono), so memory stays one block for
// any length: the encoded bytes are never decoded ahead of read().
#include "audio/audio_stream.h"

#include <sndfile.h>

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

}  // namespace

AudioStream::AudioStream(const std::string& path, int target_rate, size_t block_frames)
    : AudioStream(AudioSource::file(path), nullptr, target_rate, block_frames) {}

AudioStream::AudioStream(const std::string& name, std::shared_ptr<const std::string> bytes,
                         int target_rate, size_t block_frames)
    : AudioStream(memory_source(name, bytes), bytes, target_rate, block_frames) {}

AudioStream::AudioStream(const AudioSource& source, std::shared_ptr<const std::string> bytes,
                         int target_rate, size_t block_frames)
    : name_(source.name), bytes_(std::move(bytes)), block_frames_(block_frames) {
  if (block_frames_ == 0) throw std::invalid_argument("AudioStream: block_frames must be > 0");
  ValidatedAudio validated = open_validated(source);
  info_ = validated.info;
  file_ = std::move(validated.file);
  try {
    resampler_ = std::make_unique<Resampler>(info_.sample_rate, target_rate);
  } catch (const std::runtime_error& e) {
    throw AudioError(name_, e.what(), AudioErrorKind::kInvalid);
  }
  interleaved_.resize(block_frames_ * size_t(info_.channels));
  mono_.resize(block_frames_);
}

AudioStream::~AudioStream() = default;

// Loops until something is appended: a first block may resample to nothing
// (the filter holds samples back), and "false" must only ever mean the end.
bool AudioStream::read(std::vector<float>& out) {
  const size_t before = out.size();
  while (!done_ && out.size() == before) {
    const sf_count_t got =
        sf_readf_float(file_->get(), interleaved_.data(), sf_count_t(block_frames_));
    if (got <= 0) {
      finish_stream();
      resampler_->process(mono_.data(), 0, true, out);
      done_ = true;
      break;
    }
    check_finite(size_t(got));
    downmix(size_t(got));
    frames_read_ += got;
    resampler_->process(mono_.data(), size_t(got), false, out);
  }
  return out.size() > before;
}

// End of data: a decoder error or fewer frames than the header promised means
// the file is damaged, even though every block so far was fine.
void AudioStream::finish_stream() const {
  if (frames_read_ < info_.frames) {
    throw AudioError(name_, "truncated: header says " + std::to_string(info_.frames) +
                                " frames, read " + std::to_string(frames_read_),
                     AudioErrorKind::kInvalid);
  }
  // Only a file can fail to be read; anything else is data the decoder refused.
  const int error = sf_error(file_->get());
  if (error != SF_ERR_NO_ERROR) {
    const bool io = !bytes_ && error == SF_ERR_SYSTEM;
    throw AudioError(name_, std::string("read error (") + sf_strerror(file_->get()) + ")",
                     io ? AudioErrorKind::kIo : AudioErrorKind::kInvalid);
  }
}

// Position is the frame index in the file, so a user can find it in an editor.
// Float files are not normalised by libsndfile: a finite sample near FLT_MAX
// would overflow to Inf in the downmix or the resampler, so magnitudes past
// kMaxSampleMagnitude (60 dB over full scale) are refused like NaN and Inf.
void AudioStream::check_finite(size_t frames) const {
  constexpr float kMaxSampleMagnitude = 1000.0f;
  const size_t channels = size_t(info_.channels);
  for (size_t i = 0; i < frames * channels; ++i) {
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
