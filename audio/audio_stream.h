// Stage 2a of the pipeline: decode a validated file (on disk, or held in memory)
// in fixed blocks, downmix to mono, resample to the model's rate. Memory is one
// block, whatever the file's length. One AudioStream per file, used by one
// thread (the batch reader, or the serve request that owns the body).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio/audio_source.h"
#include "audio/audio_validation.h"
#include "audio/resampler.h"

namespace corepool {

class AudioStream {
 public:
  // Validates (validate_audio) and opens `path`. Throws AudioError.
  AudioStream(const std::string& path, int target_rate, size_t block_frames = 32768);
  // The same for a whole file held in memory (serve: a request body), decoded
  // from the buffer without temp files. `name` starts every message. The stream
  // shares ownership of `bytes`, so the caller may drop its reference. Throws
  // AudioError (validate_audio_bytes), std::invalid_argument on a null `bytes`.
  AudioStream(const std::string& name, std::shared_ptr<const std::string> bytes, int target_rate,
              size_t block_frames = 32768);
  ~AudioStream();
  AudioStream(const AudioStream&) = delete;
  AudioStream& operator=(const AudioStream&) = delete;

  const AudioInfo& info() const { return info_; }

  // Appends the next block of mono samples at target_rate to `out` (out is not
  // cleared). Returns false once the stream is exhausted (nothing appended).
  // Throws AudioError on a NaN/Inf sample ("sample 1234 is NaN") or a float
  // sample beyond +-1000 (which would overflow later stages), a file shorter
  // than its header says ("truncated: header says N frames, read M") or a read error.
  bool read(std::vector<float>& out);

  // Frames (per channel, at the file's rate) decoded so far.
  int64_t frames_read() const { return frames_read_; }

 private:
  AudioStream(const AudioSource& source, std::shared_ptr<const std::string> bytes,
              int target_rate, size_t block_frames);
  void finish_stream() const;              // throws if the data ended early or badly
  void check_finite(size_t frames) const;  // throws on the first NaN/Inf
  void downmix(size_t frames);             // interleaved_ -> mono_

  std::string name_;                          // the path, or the buffer's name
  std::shared_ptr<const std::string> bytes_;  // an in-memory file; declared before
                                              // file_, so it outlives libsndfile's handle
  AudioInfo info_;
  std::unique_ptr<SoundFile> file_;
  std::unique_ptr<Resampler> resampler_;
  size_t block_frames_;
  std::vector<float> interleaved_;
  std::vector<float> mono_;
  int64_t frames_read_ = 0;
  bool done_ = false;
};

}  // namespace corepool
