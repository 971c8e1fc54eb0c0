// StreamScorer: lanes, the task layout of a stateful model (context + chunk,
// then the state: ModelConfig::task_floats()) and the order of a lane's chunks.
// A result is taken only for the chunk its lane has in flight: anything else
// is a late duplicate of a re-dispatched task and is dropped.
#include "supervisor/batch/stream_scorer.h"

#include <algorithm>
#include <chrono>

#include "worker/stateful_task.h"

namespace corepool {
namespace {

// The lanes of the engine call whose results this thread is delivering now.
// A thread-mode engine delivers a call's results one after the other on its
// own thread, so its call's lanes gather here, apart from another engine's
// call whose results come in at the same moment (see continue_call()).
struct CallLanes {
  const void* scorer = nullptr;
  std::vector<uint64_t> lanes;
};
thread_local CallLanes t_call;

}  // namespace

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
  laned_streams_ += plan.size() > 1;
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

void StreamScorer::attach(Executor* executor) {
  std::lock_guard<std::mutex> lock(mu_);
  inline_executor_ = executor && executor->submits_from_completions() ? executor : nullptr;
}

void StreamScorer::on_complete(SegmentResult&& r) {
  if (record(std::move(r))) continue_call();
}

// True when this result ended an engine call and its lanes may go on from
// here (an attached executor); otherwise the feeding thread is woken for them.
bool StreamScorer::record(SegmentResult&& r) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lanes_.find(r.stream);
  if (it == lanes_.end() || static_cast<int64_t>(r.index) != it->second.next) {  // a late duplicate
    return inline_executor_ && ends_call(r);  // it still ends its call on this thread
  }
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
  if (inline_executor_) {
    if (t_call.scorer != this) t_call = {this, {}};
    t_call.lanes.push_back(r.stream);
    return ends_call(r);
  }
  ready_.push_back(r.stream);
  if (!ends_call(r)) return false;
  group_ready_ = true;
  ready_cv_.notify_one();
  return false;
}

// The lanes of the call that just ended on this thread (t_call) that go on;
// the ones that end join ready_ for the feeding thread.
std::vector<StreamScorer::TaskSource> StreamScorer::take_continuing() {
  std::vector<TaskSource> sources;
  if (t_call.scorer != this) return sources;  // this thread recorded no lane of ours
  for (const uint64_t id : t_call.lanes) {
    const LiveLane& lane = lanes_.at(id);
    if (lane.next < lane.span.end) {
      sources.push_back(take_source(id));
    } else {
      ready_.push_back(id);
    }
  }
  t_call.lanes.clear();
  return sources;
}

// The end of an engine call, on its thread: the call's lanes that go on are
// submitted from here, with no hop through the feeding thread. That hop (a
// wake-up, a context switch, the tasks built, then the engine woken) left each
// engine idle about a fifth of the time with two engines on two cpus (Silero,
// 200 files of 3 s, AMD EPYC Zen 5). Only this call's lanes: taking every
// ready lane took part of the other engine's call as its results came in, and
// the two calls settled at 138 and 62 lanes, the larger one setting the pace.
// Lanes that end, and tasks that did not fit the queue, are left to the
// feeding thread's pump().
void StreamScorer::continue_call() {
  std::vector<TaskSource> sources;
  Executor* executor = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    executor = inline_executor_;
    if (executor) sources = take_continuing();
    if (!executor || !ready_.empty()) {
      group_ready_ = true;
      ready_cv_.notify_one();
    }
  }
  if (sources.empty()) return;
  std::vector<SegmentTask> tasks;
  tasks.reserve(sources.size());
  for (TaskSource& src : sources) tasks.push_back(next_task(std::move(src)));
  if (executor->try_submit(tasks)) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (SegmentTask& t : tasks) overflow_.push_back(std::move(t));
  group_ready_ = true;
  ready_cv_.notify_one();
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
  std::vector<SegmentTask> tasks;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) wait_for_call(lock);
    if (lanes_.empty()) return false;
    group_ready_ = false;  // every ready lane goes now
    tasks.swap(overflow_);
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
  tasks.reserve(tasks.size() + sources.size());
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

size_t StreamScorer::laned_streams() {
  std::lock_guard<std::mutex> lock(mu_);
  return laned_streams_;
}

}  // namespace corepool
