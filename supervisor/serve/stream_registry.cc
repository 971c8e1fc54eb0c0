// StreamRegistry: see stream_registry.h. Finished sessions are reaped (their
// threads joined, their counters added to the totals) whenever the registry
// is asked for something, so no thread outlives its stream by long.
#include "supervisor/serve/stream_registry.h"

#include <algorithm>

#include "audio/pcm_stream.h"
#include "supervisor/serve/stateful_session.h"
#include "supervisor/serve/stream_session.h"

namespace corepool {
namespace {

void add_stat(StreamTotals& into, const StreamStat& s) {
  into.audio_seconds += s.audio_seconds;
  into.events += s.events;
  into.dropped += s.dropped;
}

}  // namespace

// Refused in the order a client fixes things: the model, the format, then
// the cap (a slot is taken only for a stream that can start).
AudioStreams::Opened StreamRegistry::open(const std::string& model, std::string_view pcm_query,
                                          std::unique_ptr<StreamOutput> output) {
  Opened opened;
  std::shared_ptr<Generation> gen = current_();
  if (opened.status = service_.model_ready(model, ""); !opened.status.ok()) return opened;
  const PcmSpecOrError query = parse_pcm_query(pcm_query);
  if (!query.spec) {
    opened.status = {triton::Code::kInvalidArgument, query.error};
    return opened;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) {
      opened.status = {triton::Code::kUnavailable, "the server is shutting down"};
      return opened;
    }
  }
  if (!reserve()) {
    opened.status = {triton::Code::kResourceExhausted, "too many streams: serve.max_streams (" +
                                                           std::to_string(max_streams_) + ") are open; retry later"};
    return opened;
  }
  if (tap_) output = tap_(std::move(output), model);
  std::shared_ptr<StreamSessionBase> session;
  try {
    session = make_session(std::move(gen), *query.spec, std::move(output));
  } catch (const std::exception& e) {  // soxr refused the rates
    std::lock_guard<std::mutex> lock(mu_);
    --reserved_;
    opened.status = {triton::Code::kInvalidArgument, e.what()};
    return opened;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_.streams;
  sessions_.push_back(session);
  opened.stream = std::move(session);
  return opened;
}

std::shared_ptr<StreamSessionBase> StreamRegistry::make_session(std::shared_ptr<Generation> gen, const PcmSpec& spec,
                                                                std::unique_ptr<StreamOutput> output) {
  if (gen->model().config.is_stateful()) {
    return std::make_shared<StatefulSession>(++ids_, std::move(gen), spec, std::move(output), *this, idle_s_);
  }
  return std::make_shared<StreamSession>(++ids_, std::move(gen), spec, std::move(output), *this, idle_s_);
}

bool StreamRegistry::reserve() {
  reap();
  std::lock_guard<std::mutex> lock(mu_);
  if (reserved_ >= max_streams_) {
    refused_full_.fetch_add(1);
    return false;
  }
  ++reserved_;
  return true;
}

void StreamRegistry::release() {
  std::lock_guard<std::mutex> lock(mu_);
  --reserved_;
}

void StreamRegistry::count_closed(const std::string& how) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(closed_.begin(), closed_.end(), [&](const auto& p) { return p.first == how; });
  if (it == closed_.end()) closed_.emplace_back(how, 1);
  else ++it->second;
}

void StreamRegistry::reap() {
  std::vector<std::shared_ptr<StreamSessionBase>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto split = std::stable_partition(sessions_.begin(), sessions_.end(), [](const auto& s) { return !s->finished(); });
    done.assign(split, sessions_.end());
    sessions_.erase(split, sessions_.end());
    for (const auto& s : done) add_stat(finished_, s->stat());  // their slots were released already
  }
  for (const auto& s : done) s->join();  // outside the lock: the thread may be counting its ending
}

void StreamRegistry::fill(ServeSnapshot& snapshot) {
  reap();
  std::lock_guard<std::mutex> lock(mu_);
  snapshot.stream_totals = finished_;
  for (const auto& s : sessions_) {
    const StreamStat st = s->stat();
    snapshot.streams.push_back(st);
    add_stat(snapshot.stream_totals, st);
  }
  snapshot.streams_refused_full = refused_full_.load();
  snapshot.streams_closed = closed_;
  snapshot.stream_decisions = decisions_.counts();
}

void StreamRegistry::stop() {
  std::vector<std::shared_ptr<StreamSessionBase>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    all = sessions_;
  }
  for (const auto& s : all) s->end(StreamEnd::kServerStop, "the server is shutting down");
  for (const auto& s : all) s->join();
  reap();
}

}  // namespace corepool
