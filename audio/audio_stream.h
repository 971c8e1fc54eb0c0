// Stage 2a of the pipeline: decode a validated file (on disk, held in memory or
// coming through stdin; any container and codec FFmpeg reads) in fixed blocks,
// downmix to mono, resample to the model's rate. Memory is one block and one codec frame,
// whatever the file's length. One AudioStream per file, used by one thread
// (the batch reader, or the serve request that owns the body).
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
  // Validates (validate_audio) and opens `path`; `audio_stream` picks the audio
  // stream (0 = the first). Throws AudioError.
  AudioStream(const std::string& path, int target_rate, size_t block_frames = 32768, int audio_stream = 0);
  // The same for a whole file held in memory (serve: a request body), decoded
  // from the buffer without temp files. `name` starts every message. The stream
  // shares ownership of `bytes`, so the caller may drop its reference. Throws
  // AudioError (validate_audio_bytes), std::invalid_argument on a null `bytes`.
  AudioStream(const std::string& name, std::shared_ptr<const std::string> bytes, int target_rate,
              size_t block_frames = 32768);
  // Standard input (AudioSource::standard_input): read front to back, never
  // seeked; its length is unknown until it ends. Throws AudioError.
  AudioStream(const AudioSource& pipe, int target_rate, size_t block_frames, int audio_stream = 0);
  ~AudioStream();
  AudioStream(const AudioStream&) = delete;
  AudioStream& operator=(const AudioStream&) = delete;

  const AudioInfo& info() const { return info_; }

  // Appends the next block of mono samples at target_rate to `out` (out is not
  // cleared). Returns false once the stream is exhausted (nothing appended).
  // Throws AudioError on a NaN/Inf sample ("sample 1234 is NaN") or a float
  // sample beyond +-1000 (which would overflow later stages), a file shorter
  // than its header says ("truncated: header says N frames, read M"), data
  // that ends in a damaged packet ("truncated at t = S s (...)"), no frames at
  // all, or a read error. A damaged stretch in the middle is not an error: it
  // is read as silence and listed in skipped().
  bool read(std::vector<float>& out);

  // Frames (per channel, at the decoded rate) read so far, skipped stretches included.
  int64_t frames_read() const { return frames_read_; }
  // Stretches that could not be decoded (so far), in order.
  const std::vector<SkippedStretch>& skipped() const { return decoder_->skipped(); }

 private:
  AudioStream(const AudioSource& source, std::shared_ptr<const std::string> bytes,
              int target_rate, size_t block_frames, int audio_stream);
  size_t fill_block();                     // decodes until a block is buffered; returns its frames
  int64_t claimed_frames() const;          // the header's length, at the decoded rate
  void trim_padding();                     // drops a lossy codec's padding past the stated end
  void finish_stream() const;              // throws if the data ended early or badly
  void check_finite(size_t frames) const;  // throws on the first NaN/Inf
  void downmix(size_t frames);             // interleaved_ -> mono_

  std::string name_;                          // the path, or the buffer's name
  std::shared_ptr<const std::string> bytes_;  // an in-memory file; declared before
                                              // decoder_, so it outlives FFmpeg's reads
  AudioInfo info_;
  std::unique_ptr<AudioDecoder> decoder_;
  int target_rate_;
  std::unique_ptr<Resampler> resampler_;      // made at the first frame, at the decoded rate
  size_t block_frames_;
  std::vector<float> interleaved_;            // one block and at most one codec frame more
  std::vector<float> mono_;
  int64_t frames_read_ = 0;
  bool decoded_all_ = false;
  bool done_ = false;
};

}  // namespace corepool
