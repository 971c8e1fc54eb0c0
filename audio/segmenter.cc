// Segmenter: the sliding window of stage 2b. Segment k covers stream samples
// [k*hop, k*hop + length). The buffer holds samples from the next segment's
// start on; consumed samples are dropped at the next push(), not in next(), so
// a block that yields many segments costs one memmove instead of one each.
#include "audio/segmenter.h"

#include <algorithm>
#include <stdexcept>

namespace corepool {

Segmenter::Segmenter(size_t length, size_t hop) : length_(length), hop_(hop) {
  if (length == 0 || hop == 0) {
    throw std::invalid_argument("Segmenter: length and hop must be > 0");
  }
}

// Invariant: buffer_ holds stream samples [buffer_start_, pushed_), and
// buffer_start_ <= next_start() unless the next segment starts beyond pushed_
// (hop > length leaves gaps no segment covers; those samples are never kept).
void Segmenter::push(const float* data, size_t n) {
  const int64_t keep_from = std::min(next_start(), pushed_);
  buffer_.erase(buffer_.begin(), buffer_.begin() + (keep_from - buffer_start_));
  buffer_start_ = keep_from;

  size_t skip = 0;
  if (next_start() > pushed_) skip = std::min(n, size_t(next_start() - pushed_));
  if (skip > 0) buffer_start_ += int64_t(skip);  // buffer_ is empty here
  buffer_.insert(buffer_.end(), data + skip, data + n);
  pushed_ += int64_t(n);
}

bool Segmenter::next(Segment& out) {
  const int64_t start = next_start();
  if (start + int64_t(length_) > pushed_) return false;
  emit(start, out);
  return true;
}

// A tail exists when real samples lie beyond both the last segment's end and
// the next segment's start. The first condition stops a tail that would only
// repeat covered audio (hop < length); the second stops one made of nothing
// but a gap (hop > length). A short, non-empty stream satisfies both.
bool Segmenter::finish(Segment& out) {
  if (next(out)) return true;
  const int64_t start = next_start();
  if (pushed_ <= std::max(covered_until_, start)) return false;
  emit(start, out);
  return true;
}

void Segmenter::emit(int64_t start, Segment& out) {
  const auto first = buffer_.begin() + (start - buffer_start_);
  const int64_t valid = std::min<int64_t>(int64_t(length_), pushed_ - start);
  out.index = next_index_;
  out.start_sample = start;
  out.valid_samples = valid;
  out.samples.assign(first, first + valid);
  out.samples.resize(length_, 0.0f);
  covered_until_ = start + valid;
  ++next_index_;
}

std::vector<std::vector<float>> cut_segments(const float* data, size_t n, size_t length, size_t hop) {
  Segmenter segmenter(length, hop);
  segmenter.push(data, n);
  std::vector<std::vector<float>> out;
  Segment s;
  while (segmenter.next(s)) out.push_back(std::move(s.samples));
  while (segmenter.finish(s)) out.push_back(std::move(s.samples));
  return out;
}

}  // namespace corepool
