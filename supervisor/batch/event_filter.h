// `corepool batch --min-score S --merge-gap SECONDS`: what happens to one
// file's events between the EventBuilder and the writer. An event scoring
// below S is dropped first; then events of one label whose gap (the next
// start minus the previous end) is at most SECONDS become one, spanning both,
// with the higher score (as EventBuilder itself scores adjacent segments).
// One per file, fed from that file's EventBuilder under the batch's lock.
#pragma once

#include <functional>
#include <map>
#include <cstddef>
#include <string>
#include <vector>

#include "audio/events.h"

namespace corepool {

struct EventFilterOptions {
  double min_score = 0;    // events below this are dropped; 0 keeps all
  double merge_gap = -1;   // seconds; < 0: no merging
  bool merges() const { return merge_gap >= 0; }
};

class EventFilter {
 public:
  using Emit = std::function<void(const Event&)>;
  EventFilter(EventFilterOptions options, Emit emit);

  // Events arrive in start order (EventBuilder's). Without merging each kept
  // event leaves at once, so a live stream still prints it when it closes;
  // with merging an event of a label can grow until the file ends, so all are
  // held and leave in finish(), in start order.
  void add(const Event& event);
  void finish();

 private:
  EventFilterOptions options_;
  Emit emit_;
  // Held events in arrival (start) order; a merge only moves an end, so the
  // order stays right. last_ points at each label's latest held event.
  std::vector<Event> held_;
  std::map<std::string, size_t> last_;
};

}  // namespace corepool
