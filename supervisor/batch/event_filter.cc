// The per-file event filter; see event_filter.h.
#include "supervisor/batch/event_filter.h"

#include <algorithm>
#include <utility>

namespace corepool {

EventFilter::EventFilter(EventFilterOptions options, Emit emit) : options_(options), emit_(std::move(emit)) {}

void EventFilter::add(const Event& event) {
  if (event.score < options_.min_score) return;
  if (!options_.merges()) {
    emit_(event);
    return;
  }
  auto last = last_.find(event.label);
  // A negative gap (segments overlap, so events of one label may too) merges as well.
  if (last != last_.end() && event.start - held_[last->second].end <= options_.merge_gap) {
    Event& held = held_[last->second];
    held.end = std::max(held.end, event.end);
    held.score = std::max(held.score, event.score);
    return;
  }
  last_[event.label] = held_.size();
  held_.push_back(event);
}

void EventFilter::finish() {
  for (const Event& e : held_) emit_(e);
  held_.clear();
  last_.clear();
}

}  // namespace corepool
