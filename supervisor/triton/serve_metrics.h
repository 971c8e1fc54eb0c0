// /metrics for `corepool serve`: request counters and latency histograms by
// endpoint (recorded by the routes as each answer leaves), plus a snapshot of
// the HTTP server, the executor, memory and the allocator, rendered in the
// Prometheus text exposition format (version 0.0.4). observe() is called from
// any thread; render() is a pure function of its inputs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "supervisor/http/http_server.h"
#include "supervisor/pool/process_memory.h"
#include "worker/executor.h"

namespace corepool {

// Upper bounds (seconds) of the latency histogram: from a health check on
// loopback (tens of microseconds) to a long audio file (seconds).
constexpr std::array<double, 16> kLatencyBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};

// Upper bounds (seconds) of corepool_stream_decision_seconds: from a chunk
// decided in a millisecond to a stream ten seconds behind.
constexpr std::array<double, 14> kDecisionBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
                                                     0.1,   0.25,   0.5,   1,    2.5,   5,    10};

// A histogram's counts as /metrics shows them: counts[i] of observations in
// (bounds[i-1], bounds[i]], counts.back() above the last bound (+Inf).
struct HistogramCounts {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1, not cumulative
  uint64_t count = 0;
  double sum = 0;
  // Prometheus' histogram_quantile(): the bucket holding rank q * count,
  // linearly interpolated inside it from its lower bound (0 for the first);
  // in the +Inf bucket, the last bound. 0 with no observations.
  double quantile(double q) const;
};

// Observations of one latency, from any thread.
class LatencyHistogram {
 public:
  template <size_t N>
  explicit LatencyHistogram(const std::array<double, N>& bounds) : bounds_(bounds.begin(), bounds.end()),
                                                                    counts_(N + 1, 0) {}
  void observe(double seconds);
  HistogramCounts counts() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // under mu_
  uint64_t count_ = 0;            // under mu_
  double sum_ = 0;                // under mu_
};

// Adds `from`'s counters (busy seconds slot by slot, batches, segments,
// restarts, ...) to `into`'s; gauges (outstanding, depth, pids, readiness) stay
// `into`'s. So that /metrics counters span generations as statistics do.
void add_executor_counters(ExecutorStats& into, const ExecutorStats& from);

// One audio stream (a WebSocket at /v2/models/NAME/audio/stream or a
// sequence of gRPC's ModelStreamInfer), or the sum of many.
struct StreamStat {
  uint64_t id = 0;
  double audio_seconds = 0;   // audio received, at the client's rate
  uint64_t events = 0;        // events sent
  uint64_t dropped = 0;       // frames not sent: the client did not read
  double lag_seconds = 0;     // audio received whose results are not all in yet, queued audio included
};
struct StreamTotals {
  uint64_t streams = 0;       // streams opened (upgraded)
  double audio_seconds = 0;
  uint64_t events = 0;
  uint64_t dropped = 0;
};

// One [[source]] serve pulls itself (supervisor/serve/source_runner.h).
struct SourceStat {
  std::string name;
  std::string state;          // connecting | running | backoff | finished | stopped
  double audio_seconds = 0;   // decoded since start, every connection
  uint64_t events = 0;        // events written
  uint64_t reconnects = 0;    // attempts after a drop or a failed attempt
  double lag_seconds = 0;     // audio whose events are not decided yet
  uint64_t sink_failures = 0; // event lines a sink could not write
};

struct ServeSnapshot {
  HttpStats http;
  ExecutorStats executor;
  std::string mode;                // "thread" | "process"
  std::string model;               // the model's name
  std::string optimize = "none";   // engine.optimize as applied (worker/engine_plan.h)
  int max_batch = 0;               // the batch size the engines use
  bool max_batch_measured = false; // ... chosen by the start-up calibration
  uint64_t generation = 0;         // 1 + successful reloads
  uint64_t reloads_failed = 0;
  uint64_t timed_out = 0;          // infer requests answered 504 at their deadline
  uint64_t cancelled = 0;          // infer requests cancelled before their answer (client gone)
  uint64_t results_dropped = 0;    // segment results (cancellations too) after their request was answered
  size_t audio_pending = 0;        // /v1/audio:tag requests queued or decoding
  uint64_t refused_unauthenticated = 0;  // model control without the right token (401 / UNAUTHENTICATED)
  uint64_t refused_forbidden = 0;        // model control while it is off (403 / PERMISSION_DENIED)
  bool lame_duck = false;                // SIGTERM with serve.lame_duck_s: readiness 503, still serving
  std::vector<StreamStat> streams;       // the audio streams open now (WebSocket and gRPC)
  StreamTotals stream_totals;            // every stream since start, open ones included
  uint64_t streams_refused_full = 0;     // upgrades answered 503: serve.max_streams open
  std::vector<std::pair<std::string, uint64_t>> streams_closed;  // by how they ended
  HistogramCounts stream_decisions{std::vector<double>(kDecisionBuckets.begin(), kDecisionBuckets.end()),
                                   std::vector<uint64_t>(kDecisionBuckets.size() + 1, 0)};  // a segment's / chunk's last sample in -> its result back
  std::vector<SourceStat> sources;       // the [[source]]s, in config order
  size_t event_subscribers = 0;          // GET /v2/events connections open
  uint64_t events_published = 0;         // messages published to them (each once, whatever the subscribers)
  uint64_t events_dropped = 0;           // messages a subscriber that did not read lost
  std::vector<std::pair<std::string, ProcessMemory>> memory;  // "supervisor", "worker-0", ...
  std::vector<std::pair<std::string, uint64_t>> allocator;    // jemalloc stats, bytes
};

class ServeMetrics {
 public:
  // `protocol` ("http", "grpc") and `endpoint` are each one of a small fixed
  // set of names (never a raw path, which a client could make unbounded).
  void observe(const std::string& protocol, const std::string& endpoint, int code, double seconds);
  std::string render(const ServeSnapshot& snapshot) const;

 private:
  struct Histogram {
    std::array<uint64_t, kLatencyBuckets.size()> buckets{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  struct Key {  // endpoint first: the order the labels are rendered in
    std::string endpoint;
    int code;
    std::string protocol;
    bool operator<(const Key& o) const {
      return std::tie(endpoint, code, protocol) < std::tie(o.endpoint, o.code, o.protocol);
    }
  };
  std::map<Key, uint64_t> requests_;
  std::map<std::pair<std::string, std::string>, Histogram> latency_;  // (endpoint, protocol)
};

}  // namespace corepool
