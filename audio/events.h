// Stage 4 of the pipeline: per-segment scores -> labels over threshold ->
// events {start, end, label, score}. Segments may arrive in any order (engine
// threads or workers finish out of order); events leave in start-time order.
// Adjacent (index-consecutive) segments with the same label merge into one event
// whose score is the highest segment score. One EventBuilder per file.
// docs/models.md ("Bring your own model") explains the time rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace corepool {

struct Event {
  double start = 0;   // seconds from the start of the file
  double end = 0;     // seconds, clipped to the file's duration
  std::string label;
  float score = 0;    // max over the merged segments
};

class EventBuilder {
 public:
  using Emit = std::function<void(const Event&)>;
  // thresholds.size() must equal labels.size(), and segment_seconds and
  // hop_seconds must be > 0 (std::invalid_argument otherwise). Segment i hears
  // [i * hop, i * hop + segment], but its scores speak for the hop at its
  // middle, [i * hop + (segment - hop) / 2, i * hop + (segment + hop) / 2]:
  // the spans of consecutive segments tile the file, so a model that hears
  // 2 s at a time still places a boundary within half a hop, and two labels'
  // events do not overlap. The first segment's span starts at 0 and the last
  // one's ends at the end of the audio, so the spans cover the whole file.
  //
  // quiet_label (optional, an index into labels) names a label that a segment
  // only gets when nothing in its whole window sounds (the default tagger's
  // silence). A quiet segment (that label on, no other) says more than its
  // middle hop: nothing sounds anywhere in its window. So where a quiet
  // segment and a sounding one (another label on) meet, their boundary moves
  // toward the sounding one, to the edge of the quiet window, but never past
  // the middle of the sounding segment's span; a sounding segment between two
  // quiet ones gives up one side only. Spans still tile the file and every
  // sounding segment keeps at least half of its span, so no event is lost.
  EventBuilder(std::vector<std::string> labels, std::vector<float> thresholds,
               double segment_seconds, double hop_seconds, Emit emit,
               std::optional<size_t> quiet_label = std::nullopt);

  // Scores of segment `index` (size == labels.size(), else std::invalid_argument;
  // the same index twice, or any call after finish(), is std::logic_error).
  // Events that can no longer change and start no later than any still-open
  // event are emitted right away. Only the last segment's span may reach past
  // the end of the audio, and events emitted here never contain it, so they
  // need no clip.
  void add(uint64_t index, const std::vector<float>& scores);

  // All segments 0..total_segments-1 have been added (std::logic_error naming
  // the first missing index if not, or if an index >= total_segments was added):
  // closes open events, clips starts and ends to duration_seconds, drops events
  // left with no length, emits the rest in order. Call once.
  void finish(uint64_t total_segments, double duration_seconds);

  // Segments received out of order and still waiting for a predecessor.
  size_t pending() const { return waiting_.size(); }

 private:
  // Emission order: (first segment index, position of the label in labels_).
  // Starts grow with the index because hop_seconds > 0, so this is start order.
  using Key = std::pair<uint64_t, size_t>;
  // Times are span boundaries (seconds), fixed when the run opens or closes.
  struct Open { bool active = false; uint64_t first = 0; uint64_t last = 0; float score = 0; double start = 0; };
  struct Closed { uint64_t last = 0; float score = 0; double start = 0; double end = 0; };
  enum class Kind { kNone, kQuiet, kSounding };  // see quiet_label above

  void fold(uint64_t index, const std::vector<float>& scores);
  Kind kind_of(const std::vector<float>& scores) const;
  double span_start(uint64_t index, Kind kind);
  double middle_hop_start(uint64_t index) const;  // index * hop + (segment - hop) / 2
  void close(size_t label, double end);
  void emit_ready();
  Event make_event(const Key& key, const Closed& closed) const;

  std::vector<std::string> labels_;
  std::vector<float> thresholds_;
  double segment_seconds_;
  double hop_seconds_;
  Emit emit_;
  std::optional<size_t> quiet_;
  std::map<uint64_t, std::vector<float>> waiting_;  // out-of-order arrivals
  uint64_t next_index_ = 0;                         // next index to fold in
  std::vector<Open> open_;                          // one per label
  std::map<Key, Closed> closed_;                    // closed, waiting for an earlier open event
  // The segment folded last: its kind, where its span starts, and whether a
  // quiet segment before it took part of its span.
  Kind last_kind_ = Kind::kNone;
  double last_start_ = 0;
  bool last_cut_ = false;
  bool finished_ = false;
};

}  // namespace corepool
