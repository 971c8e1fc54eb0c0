// StreamScorer: lanes, the task layout of a stateful model (context + chunk,
// then the state: ModelConfig::task_floats()) and the order of a lane's chunks.
// A result is taken only for the chunk its lane has in flight: anything else
// is a late duplicate of a re-dispatched task and is dropped.
#include "supervisor/batch/stream_scorer.h"

#include <algorithm>
#include <chrono>

#include "worker/stateful_task.h"

namespace corepool {

StreamScorer::StreamScorer(const ModelConfig& model, Done done) : model_(model), done_(std::move(done)) {}

void StreamScorer::add(uint64_t stream, std::shared_ptr<const std::vector<float>> samples) {
  const StatefulSpec& s = model_.stateful;
  const int64_t chunk = s.chunk_samples;
  const int64_t chunks = (static_cast<int64_t>(samples->size()) + chunk - 1) / chunk;
  const auto chunks_of = [&](double seconds) { return static_cast<int64_t>(seconds * model_.sample_rate / chunk); };
  const std::vector<Lane> plan = plan_lanes(chunks, chunks_of(s.lane_seconds), chunks_of(s.lane_warmup_seconds));
  if (plan.empty()) {  // no audio, no chunk: done at once
    done_(stream, {}, "");
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  StreamState& state = streams_[stream];
  state.samples = std::move(samples);
  state.scores.assign(static_cast<size_t>(chunks) * model_.labels.size(), 0.0f);
  state.lanes_left = plan.size();
  for (const Lane& span : plan) {
    const uint64_t id = next_lane_++;
    lanes_[id] = {stream, span, span.first, std::vector<float>(s.state_floats(), s.state_initial)};
    ready_.push_back(id);
  }
  group_ready_ = true;
}

// What a lane's next task needs, taken under mu_ (the lane's state is moved
// out: its next one comes with the result), so that the copying is done after
// the lock is released and engine threads delivering results do not wait on it.
StreamScorer::TaskSource StreamScorer::take_source(uint64_t lane_id) {
  LiveLane& lane = lanes_.at(lane_id);
  return {lane_id, lane.next, lane.next == lane.span.first, streams_.at(lane.stream).samples, std::move(lane.state)};
}

// Context (the previous chunk's last samples; zeros at a lane's first chunk,
// as for a fresh stream), the chunk (zero-padded past the end), the state.
SegmentTask StreamScorer::next_task(TaskSource&& src) const {
  const std::vector<float>& samples = *src.samples;
  const StatefulSpec& s = model_.stateful;
  const int64_t chunk_start = src.chunk * s.chunk_samples;
  const int64_t from = src.first ? chunk_start : chunk_start - s.context_samples;
  const int64_t to = std::min<int64_t>(chunk_start + s.chunk_samples, static_cast<int64_t>(samples.size()));
  const int64_t offset = from - (chunk_start - s.context_samples);  // where `from` lands in the task
  return stateful_task(model_, src.lane, static_cast<uint64_t>(src.chunk), samples.data() + from,
                       std::max<int64_t>(0, to - from), offset, src.state);
}

void StreamScorer::on_complete(SegmentResult&& r) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lanes_.find(r.stream);
  if (it == lanes_.end() || static_cast<int64_t>(r.index) != it->second.next) return;  // a late duplicate
  LiveLane& lane = it->second;
  StreamState& stream = streams_.at(lane.stream);
  const size_t labels = model_.labels.size();
  if (std::string error = stateful_result_error(model_, r); !error.empty()) {
    if (stream.error.empty()) stream.error = std::move(error);
    lane.next = lane.span.end;  // this lane stops; the stream fails once its other lanes end
  } else {
    if (lane.next >= lane.span.keep) {  // a warm-up chunk's scores are dropped
      std::copy(r.scores.begin(), r.scores.begin() + labels, stream.scores.begin() + lane.next * labels);
    }
    take_state(model_, r, lane.state);
    ++lane.next;
  }
  ready_.push_back(r.stream);
  if (ends_call(r)) {
    group_ready_ = true;
    ready_cv_.notify_one();
  }
}

void StreamScorer::end_lane(uint64_t lane_id, std::vector<Finished>& done) {
  const uint64_t stream = lanes_.at(lane_id).stream;
  lanes_.erase(lane_id);
  auto it = streams_.find(stream);
  if (--it->second.lanes_left > 0) return;
  done.push_back({stream, std::move(it->second)});
  streams_.erase(it);
}

void StreamScorer::report(std::vector<Finished>& done) {
  for (Finished& f : done) done_(f.stream, std::move(f.state.scores), f.state.error);
}

// One call's results come back one by one, microseconds apart in thread mode,
// in bursts as the supervisor's loop drains a ring in process mode.
// Submitting the first alone would hand an idle engine a batch of one, and the
// calls would fragment from then on. So the feeding thread is woken only when
// a call's last result is in (its batch position says so; a result that never
// ran has no batch): that call's lanes go out again together, and an engine
// finds them queued as one batch. Each engine's lanes so keep to one group
// that goes round whole, with no timed wait in the way; waking once per call,
// not once per result, also spares the cpus the engines run on. kStraggler
// bounds the wait should a call's last result never come (its worker died
// after answering part of it: the rest is re-dispatched and ends a call of
// its own, but not necessarily soon).
bool StreamScorer::ends_call(const SegmentResult& r) {
  return r.timing.batch == 0 || r.timing.batch_pos + 1 >= r.timing.batch;
}

void StreamScorer::wait_for_call(std::unique_lock<std::mutex>& lock) {
  while (!group_ready_ && !lanes_.empty()) {
    if (!ready_cv_.wait_for(lock, kStraggler, [&] { return group_ready_ || lanes_.empty(); }) && !ready_.empty()) {
      break;
    }
  }
}

bool StreamScorer::pump(Executor& executor, bool wait) {
  std::vector<TaskSource> sources;
  std::vector<Finished> done;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) wait_for_call(lock);
    if (lanes_.empty()) return false;
    group_ready_ = false;  // every ready lane goes now
    for (; !ready_.empty(); ready_.pop_front()) {
      const uint64_t id = ready_.front();
      if (lanes_.at(id).next >= lanes_.at(id).span.end) {
        end_lane(id, done);
      } else {
        sources.push_back(take_source(id));
      }
    }
  }
  report(done);
  std::vector<SegmentTask> tasks;
  tasks.reserve(sources.size());
  for (TaskSource& src : sources) tasks.push_back(next_task(std::move(src)));
  // Every live lane has one task queued at most: the caller keeps live lanes
  // within the executor's depth, so this fits; if not, one by one (blocking).
  if (!tasks.empty() && !executor.try_submit(tasks)) {
    for (auto& task : tasks) executor.submit(std::move(task));
  }
  return true;
}

size_t StreamScorer::live_lanes() {
  std::lock_guard<std::mutex> lock(mu_);
  return lanes_.size();
}

}  // namespace corepool
