// Stage 2b of the pipeline: cuts a mono sample stream into fixed-length,
// possibly overlapping segments (length and hop from model.toml). Keeps only
// the samples the next segment still needs, so memory does not grow with the
// stream. Used by the batch reader, one per file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace corepool {

struct Segment {
  uint64_t index = 0;          // 0, 1, 2 ... in stream order
  int64_t start_sample = 0;    // index * hop
  int64_t valid_samples = 0;   // samples of real audio; < length only for the padded tail
  std::vector<float> samples;  // exactly `length` samples (tail zero-padded)
};

class Segmenter {
 public:
  Segmenter(size_t length, size_t hop);  // throws std::invalid_argument if either is 0

  void push(const float* data, size_t n);
  // Moves the next complete segment into `out`; false if more input is needed.
  bool next(Segment& out);
  // After the last push: the zero-padded tail segment, if some samples are not
  // covered by a segment yet (or the stream was shorter than one segment but not
  // empty). Returns false if there is none. Call repeatedly until false.
  // Complete segments that next() has not handed out yet come first.
  bool finish(Segment& out);

  uint64_t segments_emitted() const { return next_index_; }
  int64_t samples_pushed() const { return pushed_; }
  // Samples held right now; stays below length + hop + the last push's size
  // when next() is drained after every push. For tests and memory accounting.
  size_t buffered_samples() const { return buffer_.size(); }

 private:
  int64_t next_start() const { return int64_t(next_index_ * hop_); }
  void emit(int64_t start, Segment& out);  // fills `out` from start; pads if short

  size_t length_;
  size_t hop_;
  std::vector<float> buffer_;  // samples from buffer_start_ on
  int64_t buffer_start_ = 0;   // stream position of buffer_[0]
  int64_t pushed_ = 0;
  uint64_t next_index_ = 0;
  int64_t covered_until_ = 0;  // end of the last emitted segment's real audio
};

// Every segment of audio already in memory, cut as a stream would be (the
// trainer and the benchmarks hold whole recordings). Throws like Segmenter.
std::vector<std::vector<float>> cut_segments(const float* data, size_t n, size_t length, size_t hop);

}  // namespace corepool
