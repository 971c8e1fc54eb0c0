// AudioStream: decode -> check -> downmix -> resample, one block per read().
// Called by the batch reader thread. Owns the SNDFILE handle and the two block
// buffers (interleaved and mono), so memory stays one block for any length.
#include "worker/audio_stream.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace corepool {

AudioStream::AudioStream(const std::string& path, int target_rate, size_t block_frames)
    : path_(path), info_(validate_audio(path)), block_frames_(block_frames) {
  if (block_frames_ == 0) throw std::invalid_argument("AudioStream: block_frames must be > 0");
  try {
    resampler_ = std::make_unique<Resampler>(info_.sample_rate, target_rate);
  } catch (const std::runtime_error& e) {
    throw AudioError(path_, e.what());
  }
  interleaved_.resize(block_frames_ * size_t(info_.channels));
  mono_.resize(block_frames_);
  // Opened last: nothing after it can throw, so the destructor always closes it.
  SF_INFO sfi{};
  file_ = sf_open(path_.c_str(), SFM_READ, &sfi);
  if (!file_) throw AudioError(path_, std::string("cannot open (") + sf_strerror(nullptr) + ")");
}

AudioStream::~AudioStream() {
  if (file_) sf_close(file_);
}

// Loops until something is appended: a first block may resample to nothing
// (the filter holds samples back), and "false" must only ever mean the end.
bool AudioStream::read(std::vector<float>& out) {
  const size_t before = out.size();
  while (!done_ && out.size() == before) {
    const sf_count_t got = sf_readf_float(file_, interleaved_.data(), sf_count_t(block_frames_));
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
    throw AudioError(path_, "truncated: header says " + std::to_string(info_.frames) +
                                " frames, read " + std::to_string(frames_read_));
  }
  if (sf_error(file_) != SF_ERR_NO_ERROR) {
    throw AudioError(path_, std::string("read error (") + sf_strerror(file_) + ")");
  }
}

// Position is the frame index in the file, so a user can find it in an editor.
void AudioStream::check_finite(size_t frames) const {
  const size_t channels = size_t(info_.channels);
  for (size_t i = 0; i < frames * channels; ++i) {
    const float v = interleaved_[i];
    if (std::isfinite(v)) continue;
    const std::string what = std::isnan(v) ? "NaN" : (v > 0 ? "+Inf" : "-Inf");
    throw AudioError(path_, "sample " + std::to_string(frames_read_ + int64_t(i / channels)) +
                                " is " + what);
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
