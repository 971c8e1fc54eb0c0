// EventBuilder: folds per-segment scores into events in segment-index order
// through a reorder buffer, and emits each event once nothing that could start
// earlier is still undecided. Called by the batch driver as results come back;
// owns the out-of-order scores, one open run per label and the closed backlog.
#include "audio/events.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

namespace corepool {

EventBuilder::EventBuilder(std::vector<std::string> labels, std::vector<float> thresholds,
                           double segment_seconds, double hop_seconds, Emit emit,
                           std::optional<size_t> quiet_label)
    : labels_(std::move(labels)),
      thresholds_(std::move(thresholds)),
      segment_seconds_(segment_seconds),
      hop_seconds_(hop_seconds),
      emit_(std::move(emit)),
      quiet_(quiet_label),
      open_(labels_.size()) {
  if (thresholds_.size() != labels_.size()) {
    throw std::invalid_argument("EventBuilder: " + std::to_string(labels_.size()) +
                                " labels but " + std::to_string(thresholds_.size()) +
                                " thresholds");
  }
  // `!(x > 0)` also rejects NaN. A zero hop would give every segment the same
  // start, and the index order would no longer be the start order.
  if (!(segment_seconds_ > 0) || !(hop_seconds_ > 0)) {
    throw std::invalid_argument("EventBuilder: segment and hop lengths must be > 0");
  }
  if (quiet_ && *quiet_ >= labels_.size()) {
    throw std::invalid_argument("EventBuilder: quiet label " + std::to_string(*quiet_) + " of " +
                                std::to_string(labels_.size()) + " labels");
  }
}

void EventBuilder::add(uint64_t index, const std::vector<float>& scores) {
  if (finished_) throw std::logic_error("EventBuilder::add after finish");
  // Validate before touching any state, so a bad call leaves the builder usable.
  if (scores.size() != labels_.size()) {
    throw std::invalid_argument("EventBuilder::add: segment " + std::to_string(index) + " has " +
                                std::to_string(scores.size()) + " scores, expected " +
                                std::to_string(labels_.size()));
  }
  if (index < next_index_ || waiting_.count(index) != 0) {
    throw std::logic_error("EventBuilder::add: segment " + std::to_string(index) +
                           " was added twice");
  }
  if (index != next_index_) {
    waiting_.emplace(index, scores);  // a predecessor is still missing
    return;
  }
  fold(index, scores);
  // The new segment may have been the gap that held back later arrivals.
  for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_index_;
       it = waiting_.erase(it)) {
    fold(it->first, it->second);
  }
}

void EventBuilder::finish(uint64_t total_segments, double duration_seconds) {
  if (finished_) throw std::logic_error("EventBuilder::finish called twice");
  const std::string of_total = " (file has " + std::to_string(total_segments) + " segments)";
  // The highest index seen is either still waiting or was the last one folded.
  const uint64_t seen_end = waiting_.empty() ? next_index_ : waiting_.rbegin()->first + 1;
  if (seen_end > total_segments) {
    throw std::logic_error("EventBuilder::finish: segment " + std::to_string(seen_end - 1) +
                           " was added" + of_total);
  }
  if (next_index_ < total_segments) {
    throw std::logic_error("EventBuilder::finish: segment " + std::to_string(next_index_) +
                           " was never added" + of_total);
  }
  finished_ = true;
  // The last span's nominal end; moved to the end of the audio below.
  const double last_end = middle_hop_start(total_segments);
  for (size_t label = 0; label < open_.size(); ++label) {
    if (open_[label].active) close(label, last_end);
  }
  // Everything is closed now, so the whole backlog goes out, in key order.
  for (const auto& [key, closed] : closed_) {
    Event event = make_event(key, closed);
    // The last segment speaks for the audio up to the end (see the header).
    if (closed.last + 1 == total_segments) event.end = duration_seconds;
    event.start = std::min(event.start, duration_seconds);
    event.end = std::min(event.end, duration_seconds);
    if (event.end > event.start) emit_(event);
  }
  closed_.clear();
}

// Folds segment next_index_ into the per-label runs. A label that goes off
// closes its run; its event then waits in closed_ until emit_ready lets it go.
void EventBuilder::fold(uint64_t index, const std::vector<float>& scores) {
  const Kind kind = kind_of(scores);
  // Runs that end before this segment end where its span starts.
  const double start = span_start(index, kind);
  for (size_t label = 0; label < labels_.size(); ++label) {
    Open& run = open_[label];
    const float score = scores[label];
    if (score >= thresholds_[label]) {  // == threshold is on
      if (!run.active) {
        run = Open{true, index, index, score, start};
      } else {
        run.last = index;
        run.score = std::max(run.score, score);
      }
    } else if (run.active) {
      close(label, start);
    }
  }
  next_index_ = index + 1;
  emit_ready();
}

EventBuilder::Kind EventBuilder::kind_of(const std::vector<float>& scores) const {
  bool quiet = false;
  for (size_t label = 0; label < labels_.size(); ++label) {
    if (!(scores[label] >= thresholds_[label])) continue;
    if (quiet_ && label == *quiet_) {
      quiet = true;
    } else {
      return Kind::kSounding;
    }
  }
  return quiet ? Kind::kQuiet : Kind::kNone;
}

// Where segment `index`'s span starts: its middle hop (0 for segment 0),
// moved by the quiet rule (see the header) when it and the segment before it
// are one quiet and one sounding. Records this segment for the next call.
double EventBuilder::span_start(uint64_t index, Kind kind) {
  double start = index == 0 ? 0.0 : middle_hop_start(index);
  bool cut = false;
  if (index > 0 && last_kind_ == Kind::kQuiet && kind == Kind::kSounding) {
    // The quiet window before ends at (index - 1) * hop + segment: the sound
    // starts after it, or in the first half of this span at the latest.
    const double quiet_end = static_cast<double>(index - 1) * hop_seconds_ + segment_seconds_;
    start = std::min(quiet_end, start + hop_seconds_ / 2);
    cut = true;
  } else if (index > 0 && last_kind_ == Kind::kSounding && kind == Kind::kQuiet && !last_cut_) {
    // This quiet window starts at index * hop: the sound before it ends
    // there, or in the second half of the sounding segment's span.
    const double quiet_start = static_cast<double>(index) * hop_seconds_;
    start = std::max(quiet_start, (last_start_ + start) / 2);
  }
  last_kind_ = kind;
  last_start_ = start;
  last_cut_ = cut;
  return start;
}

double EventBuilder::middle_hop_start(uint64_t index) const {
  return static_cast<double>(index) * hop_seconds_ + (segment_seconds_ - hop_seconds_) / 2;
}

void EventBuilder::close(size_t label, double end) {
  Open& run = open_[label];
  closed_.emplace(Key{run.first, label}, Closed{run.last, run.score, run.start, end});
  run.active = false;
}

// Emits closed events whose key is below every open run's key. Events that do
// not exist yet start at next_index_ or later, and every closed event started
// before next_index_, so they can never come first. This keeps closed_ empty
// whenever no run older than the closed events is still open.
void EventBuilder::emit_ready() {
  Key oldest_open{std::numeric_limits<uint64_t>::max(), std::numeric_limits<size_t>::max()};
  for (size_t label = 0; label < open_.size(); ++label) {
    if (open_[label].active) oldest_open = std::min(oldest_open, Key{open_[label].first, label});
  }
  while (!closed_.empty() && closed_.begin()->first < oldest_open) {
    // Taken out before emit_ runs, so a throwing callback cannot emit it twice.
    auto node = closed_.extract(closed_.begin());
    emit_(make_event(node.key(), node.mapped()));
  }
}

// An event spans its segments' spans (see the header), from the first one's
// start to the last one's end.
Event EventBuilder::make_event(const Key& key, const Closed& closed) const {
  Event event;
  event.start = closed.start;
  event.end = closed.end;
  event.label = labels_[key.second];
  event.score = closed.score;
  return event;
}

}  // namespace corepool
