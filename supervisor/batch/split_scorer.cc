// SplitScorer: which task comes next, and what a result may change. A result
// counts only for a task that is out: a late duplicate of a re-dispatched
// task finds its front already in, or its sequence already past, and is
// dropped.
#include "supervisor/batch/split_scorer.h"

#include <algorithm>

namespace corepool {

SplitScorer::SplitScorer(const ModelConfig& model, Done done) : model_(model), done_(std::move(done)) {}

void SplitScorer::add(uint64_t stream, std::shared_ptr<const std::vector<float>> samples) {
  const auto size = static_cast<int64_t>(samples->size());
  open(stream, std::move(samples), size);
  close(stream, "");
}

void SplitScorer::open(uint64_t stream, std::shared_ptr<const std::vector<float>> first, int64_t expected) {
  const StatefulSpec& spec = model_.stateful;
  Stream st;
  st.expected_chunks = (std::max<int64_t>(expected, 0) + spec.chunk_samples - 1) / spec.chunk_samples;
  st.state.assign(static_cast<size_t>(spec.state_floats()), spec.state_initial);
  st.total = static_cast<int64_t>(first->size());
  if (st.total > 0) st.blocks.push_back({0, std::move(first)});
  grow(st);
  std::lock_guard<std::mutex> lock(mu_);
  streams_.emplace(stream, std::move(st));
  news_ = true;
}

void SplitScorer::extend(uint64_t stream, std::shared_ptr<const std::vector<float>> block) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end() || block->empty()) return;
  Stream& s = it->second;
  const auto size = static_cast<int64_t>(block->size());
  s.blocks.push_back({s.total, std::move(block)});
  s.total += size;
  grow(s);
  news_ = true;
}

void SplitScorer::close(uint64_t stream, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  Stream& s = it->second;
  s.closed = true;
  if (!error.empty() && s.error.empty()) s.error = error;
  grow(s);
  news_ = true;
}

// An open stream's chunks are the whole ones in; the last, zero-padded one
// counts once the stream is closed.
void SplitScorer::grow(Stream& s) const {
  const StatefulSpec& spec = model_.stateful;
  const int64_t cs = spec.chunk_samples;
  const int64_t chunks = s.closed ? (s.total + cs - 1) / cs : s.total / cs;
  if (chunks == s.chunks) return;
  s.chunks = chunks;
  s.features.resize(static_cast<size_t>((chunks - s.features_from) * spec.split.feature_floats));
  s.front.resize(static_cast<size_t>(chunks), 0);
  s.scores.resize(static_cast<size_t>(chunks) * model_.labels.size(), 0.0f);
}

void SplitScorer::attach(Executor* executor) {
  std::lock_guard<std::mutex> lock(mu_);
  inline_executor_ = executor && executor->submits_from_completions() ? executor : nullptr;
  if (executor) {
    room_ = std::max<size_t>(1, executor->stats().depth / 2);
    engines_ = std::max(1, executor->workers());
  }
}

void SplitScorer::on_complete(SegmentResult&& r) {
  std::vector<Planned> next;
  Executor* executor = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(r.stream);
    if (it == streams_.end()) return;  // a late duplicate of a stream that ended
    if ((r.index & kSequenceBit) != 0) {
      record_sequence(it->second, r);
    } else {
      record_front(it->second, r);
    }
    learn_costs(r);
    executor = inline_executor_;
    if (executor && plan_sequence(it->first, it->second, next)) plan_company(it->first, it->second, next);
    // Otherwise the feeding thread goes on once a call has answered whole (as
    // StreamScorer::ends_call() explains), or at once for a sequence.
    const bool sequence = (r.index & kSequenceBit) != 0 && next.empty();
    if (sequence || it->second.done() || r.timing.batch == 0 || r.timing.batch_pos + 1 >= r.timing.batch) {
      news_ = true;
      news_cv_.notify_one();
    }
  }
  if (next.empty()) return;
  std::vector<SegmentTask> tasks;
  for (Planned& p : next) append_tasks(std::move(p), tasks);
  if (executor->try_submit(tasks)) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (SegmentTask& t : tasks) overflow_.push_back(std::move(t));
  news_ = true;
  news_cv_.notify_one();
}

// The stream's first error, named by the chunk it came from.
void SplitScorer::fail(Stream& s, int64_t chunk, const std::string& why) {
  s.error = "chunk " + std::to_string(chunk) + ": " + why;
}

void SplitScorer::record_front(Stream& s, const SegmentResult& r) {
  const auto chunk = static_cast<int64_t>(r.index);
  if (chunk >= s.chunks || s.front[chunk] != 1) return;  // not out: a late duplicate
  s.front[chunk] = 2;
  --s.out;
  --out_;
  const int64_t width = model_.stateful.split.feature_floats;
  if (!r.error.empty() || static_cast<int64_t>(r.scores.size()) != width) {
    if (s.error.empty()) fail(s, chunk, r.error.empty() ? "front result of the wrong size" : r.error);
    return;
  }
  std::copy(r.scores.begin(), r.scores.end(), s.features.begin() + (chunk - s.features_from) * width);
  while (s.ready < s.chunks && s.front[s.ready] == 2) ++s.ready;
}

void SplitScorer::record_sequence(Stream& s, const SegmentResult& r) {
  const auto first = static_cast<int64_t>(r.index & ~kSequenceBit);
  if (s.sequence_out == 0 || first != s.sequence_next) return;  // not out: a late duplicate
  const int64_t count = s.sequence_out;
  s.sequence_out = 0;
  --s.out;
  --out_;
  const auto labels = static_cast<int64_t>(model_.labels.size());
  const int64_t want = count * labels + model_.stateful.state_floats();
  if (!r.error.empty() || static_cast<int64_t>(r.scores.size()) != want) {
    if (s.error.empty()) fail(s, first, r.error.empty() ? "sequence result of the wrong size" : r.error);
    return;
  }
  std::copy(r.scores.begin(), r.scores.begin() + count * labels, s.scores.begin() + first * labels);
  s.state.assign(r.scores.begin() + count * labels, r.scores.end());
  s.sequence_next += count;
}

// A sequence goes once sequence_chunks features are in, or the rest of the stream's.
bool SplitScorer::plan_sequence(uint64_t id, Stream& s, std::vector<Planned>& planned) {
  const SplitSpec& split = model_.stateful.split;
  if (!s.error.empty() || s.sequence_out > 0 || s.sequence_next >= s.chunks) return false;
  const int64_t count = std::min<int64_t>(split.sequence_chunks, s.ready - s.sequence_next);
  const int64_t want = s.closed ? std::min<int64_t>(split.sequence_chunks, s.chunks - s.sequence_next)
                                : split.sequence_chunks;
  if (count < want) return false;
  Planned p{id, s.sequence_next, count, true, {}, {}};
  const auto rows = s.features.begin() + (s.sequence_next - s.features_from) * split.feature_floats;
  p.payload.assign(rows, rows + count * split.feature_floats);
  p.payload.insert(p.payload.end(), s.state.begin(), s.state.end());
  planned.push_back(std::move(p));
  let_go_features(s, s.sequence_next + count);
  s.sequence_out = count;
  ++s.out;
  ++out_;
  return true;
}

// Rows the sequences have taken go once they are most of the buffer, which
// keeps its memory: a long stream's features stay within what its fronts are
// ahead of its sequence, and touch no fresh pages. Grown to the whole stream
// instead, each doubling of a 10-minute file's features (up to 9.6 MB) faulted
// in new pages under the lock: both engines stood 3-21 ms at a time (a VM
// whose page faults cost ~12 us each, AMD EPYC Zen 5).
void SplitScorer::let_go_features(Stream& s, int64_t upto) const {
  constexpr int64_t kMinRows = 256;
  const int64_t taken = upto - s.features_from;
  if (taken < kMinRows || taken < s.chunks - upto) return;
  const int64_t width = model_.stateful.split.feature_floats;
  s.features.erase(s.features.begin(), s.features.begin() + taken * width);
  s.features_from = upto;
}

// A long stream's sequences are a chain, and a sequence submitted from a
// completion stays with the engine (or worker) that ran the last one, which
// takes it first: that engine runs the chain, the others the fronts. Alone,
// the chain would leave that engine half idle (Silero: a sequence costs about
// half what its chunks' fronts cost), so each link takes along enough of the
// stream's unsent fronts that the chain and the other engines' fronts end
// together: with U fronts unsent, L links left, E engines, a front costing f
// and a link s, L (s + K f) = (U - L K) f / (E - 1) gives
// K = U / (L E) - s (E - 1) / (f E). More, and the chain would end last;
// fewer, and that engine would idle while the others work.
void SplitScorer::plan_company(uint64_t id, Stream& s, std::vector<Planned>& planned) {
  if (front_ns_ <= 0 || sequence_ns_ <= 0) return;
  const int64_t chunks = model_.stateful.split.sequence_chunks;
  // A stream still decoding counts the links its whole length will make, if known.
  const int64_t whole = s.closed ? s.chunks : std::max(s.chunks, s.expected_chunks);
  const double links = static_cast<double>((whole - s.sequence_next + chunks - 1) / chunks);
  const double unsent = static_cast<double>(whole - s.front_next), e = engines_;
  const double k = unsent / (links * e) - sequence_ns_ * (e - 1) / (front_ns_ * e);
  // The pump keeps the room full of fronts; the company may go past it by
  // half a room, within the queue's depth. Held to the room, a stream still
  // decoding had none: the pump sends its fronts as they decode.
  const size_t company_room = room_ + room_ / 2;
  if (out_ >= company_room || s.front_next >= s.chunks) return;
  const int64_t count = std::min<int64_t>({static_cast<int64_t>(k), model_.max_batch - 1,
                                           static_cast<int64_t>(company_room - out_), s.chunks - s.front_next});
  if (count > 0) plan_fronts(id, s, count, planned);
}

// The window holds the blocks these fronts read (the previous chunk's
// context included); blocks no later front reads are let go.
void SplitScorer::plan_fronts(uint64_t id, Stream& s, int64_t count, std::vector<Planned>& planned) {
  const StatefulSpec& spec = model_.stateful;
  const auto end_of = [](const Block& b) { return b.start + static_cast<int64_t>(b.samples->size()); };
  const int64_t lo = s.front_next * spec.chunk_samples - spec.context_samples;
  const int64_t hi = (s.front_next + count) * spec.chunk_samples;
  Planned p{id, s.front_next, count, false, {}, {}};
  for (const Block& b : s.blocks) {
    if (b.start < hi && end_of(b) > lo) p.window.push_back(b);
  }
  planned.push_back(std::move(p));
  std::fill(s.front.begin() + s.front_next, s.front.begin() + s.front_next + count, uint8_t{1});
  s.front_next += count;
  s.out += static_cast<size_t>(count);
  out_ += static_cast<size_t>(count);
  const int64_t needed = s.front_next * spec.chunk_samples - spec.context_samples;
  while (!s.blocks.empty() && end_of(s.blocks.front()) <= needed) s.blocks.pop_front();
}

// A call's time is shared by its items: a front's is the call's over its
// items, a sequence's what its call took beyond the fronts with it.
void SplitScorer::learn_costs(const SegmentResult& r) {
  if (!r.error.empty() || r.timing.batch == 0 || r.timing.batch_pos != 0) return;  // once per call
  const auto infer = static_cast<double>(r.timing.infer_ns);
  const auto average = [](double& into, double sample) { into = into > 0 ? 0.9 * into + 0.1 * sample : sample; };
  if ((r.index & kSequenceBit) == 0) {
    if (r.timing.batch >= 8) average(front_ns_, infer / r.timing.batch);
  } else if (front_ns_ > 0) {
    average(sequence_ns_, std::max(0.0, infer - (r.timing.batch - 1) * front_ns_));
  }
}

// Sequences first: a stream whose features are in waits on nothing else.
void SplitScorer::plan(std::vector<Planned>& planned) {
  for (auto& [id, s] : streams_) plan_sequence(id, s, planned);
  for (auto& [id, s] : streams_) {
    if (out_ >= room_) break;
    if (!s.error.empty() || s.front_next >= s.chunks) continue;
    plan_fronts(id, s, std::min<int64_t>(static_cast<int64_t>(room_ - out_), s.chunks - s.front_next), planned);
  }
}

void SplitScorer::append_tasks(Planned&& p, std::vector<SegmentTask>& tasks) const {
  if (!p.sequence) {
    for (int64_t c = 0; c < p.count; ++c) tasks.push_back(build_front(p.stream, p.first + c, p.window));
    return;
  }
  SegmentTask task;
  task.stream = p.stream;
  task.index = static_cast<uint64_t>(p.first) | kSequenceBit;
  task.samples = std::move(p.payload);
  task.input = TaskInput::kSplitSequence;
  tasks.push_back(std::move(task));
}

// One front: the previous chunk's last samples (zeros before the stream's
// start), the chunk (zero-padded past its end), from the blocks they are in.
SegmentTask SplitScorer::build_front(uint64_t stream, int64_t chunk, const std::vector<Block>& window) const {
  const StatefulSpec& s = model_.stateful;
  const int64_t from = chunk * s.chunk_samples - s.context_samples;
  const int64_t width = s.context_samples + s.chunk_samples;
  SegmentTask task;
  task.stream = stream;
  task.index = static_cast<uint64_t>(chunk);
  task.input = TaskInput::kSplitFront;
  // Appended in order, zeros only where no block has samples: filling the
  // whole front with zeros first wrote every sample twice.
  std::vector<float>& out = task.samples;
  out.reserve(static_cast<size_t>(width));
  for (const Block& b : window) {  // in stream order, without gaps
    const std::vector<float>& samples = *b.samples;
    const int64_t lo = std::max(from + static_cast<int64_t>(out.size()), b.start);
    const int64_t hi = std::min(from + width, b.start + static_cast<int64_t>(samples.size()));
    if (hi <= lo) continue;
    out.resize(static_cast<size_t>(lo - from), 0.0f);
    out.insert(out.end(), samples.begin() + (lo - b.start), samples.begin() + (hi - b.start));
  }
  out.resize(static_cast<size_t>(width), 0.0f);
  return task;
}

bool SplitScorer::pump(Executor& executor, bool wait) {
  std::vector<SegmentTask> tasks;
  std::vector<Planned> planned;
  std::vector<std::pair<uint64_t, Stream>> finished;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait && !news_) news_cv_.wait_for(lock, kPatience, [&] { return news_ || streams_.empty(); });
    if (streams_.empty()) return false;
    news_ = false;
    tasks.swap(overflow_);
    for (auto it = streams_.begin(); it != streams_.end();) {
      if (!it->second.done()) {
        ++it;
        continue;
      }
      finished.emplace_back(it->first, std::move(it->second));
      it = streams_.erase(it);
    }
    plan(planned);
  }
  for (auto& [id, s] : finished) done_(id, std::move(s.scores), s.error);
  for (Planned& p : planned) append_tasks(std::move(p), tasks);
  // The room keeps this within the executor's depth; if not, one by one (blocking).
  if (!tasks.empty() && !executor.try_submit(tasks)) {
    for (auto& task : tasks) executor.submit(std::move(task));
  }
  return true;
}

size_t SplitScorer::live_lanes() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t unsent = 0;
  for (const auto& [id, s] : streams_) unsent += static_cast<size_t>(s.chunks - s.front_next);
  return unsent + out_;
}

}  // namespace corepool
