// Stage 2a of the pipeline: decode a validated file in fixed blocks, downmix to
// mono, resample to the model's rate. Memory is one block, whatever the file's
// length. One AudioStream per file, used by one thread (the batch reader).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "worker/audio_validation.h"
#include "worker/resampler.h"

typedef struct sf_private_tag SNDFILE;

namespace corepool {

class AudioStream {
 public:
  // Validates (validate_audio) and opens `path`. Throws AudioError.
  AudioStream(const std::string& path, int target_rate, size_t block_frames = 32768);
  ~AudioStream();
  AudioStream(const AudioStream&) = delete;
  AudioStream& operator=(const AudioStream&) = delete;

  const AudioInfo& info() const { return info_; }

  // Appends the next block of mono samples at target_rate to `out` (out is not
  // cleared). Returns false once the stream is exhausted (nothing appended).
  // Throws AudioError on a NaN/Inf sample ("sample 1234 is NaN"), a file shorter
  // than its header says ("truncated: header says N frames, read M") or a read error.
  bool read(std::vector<float>& out);

  // Frames (per channel, at the file's rate) decoded so far.
  int64_t frames_read() const { return frames_read_; }

 private:
  void finish_stream() const;              // throws if the data ended early or badly
  void check_finite(size_t frames) const;  // throws on the first NaN/Inf
  void downmix(size_t frames);             // interleaved_ -> mono_

  std::string path_;
  AudioInfo info_;
  SNDFILE* file_ = nullptr;
  std::unique_ptr<Resampler> resampler_;
  size_t block_frames_;
  std::vector<float> interleaved_;
  std::vector<float> mono_;
  int64_t frames_read_ = 0;
  bool done_ = false;
};

}  // namespace corepool
