#include "supervisor/triton/serve_metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace corepool {

double HistogramCounts::quantile(double q) const {
  if (count == 0) return 0;
  const double rank = q * double(count);
  uint64_t below = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (double(below + counts[i]) >= rank && counts[i] > 0) {
      const double lower = i == 0 ? 0 : bounds[i - 1];
      return lower + (bounds[i] - lower) * (rank - double(below)) / double(counts[i]);
    }
    below += counts[i];
  }
  return bounds.empty() ? 0 : bounds.back();
}

void LatencyHistogram::observe(double seconds) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  ++count_;
  sum_ += seconds;
}

HistogramCounts LatencyHistogram::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {bounds_, counts_, count_, sum_};
}

namespace {

// One metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::string& out, const char* name, const char* type, const char* help) : out_(out), name_(name) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  Family& sample(const std::string& labels, double value, const char* suffix = "") {
    out_ += fmt::format("{}{}{} {}\n", name_, suffix, labels.empty() ? "" : "{" + labels + "}", value);
    return *this;
  }

 private:
  std::string& out_;
  const char* name_;
};

std::string label(const char* key, const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '\\' || c == '"') escaped += '\\';
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped += c;
  }
  return fmt::format("{}=\"{}\"", key, escaped);
}

void render_http(std::string& out, const HttpStats& h) {
  Family(out, "corepool_http_connections_open", "gauge", "Client connections open now.")
      .sample("", double(h.connections_open));
  Family(out, "corepool_http_connections_accepted_total", "counter", "Client connections accepted.")
      .sample("", double(h.connections_accepted));
  Family(out, "corepool_http_connections_rejected_total", "counter",
         "Connections answered 503 and closed: over serve.max_connections.")
      .sample("", double(h.connections_rejected));
  Family bytes(out, "corepool_http_bytes_total", "counter", "Bytes read from and written to clients.");
  bytes.sample(label("direction", "in"), double(h.bytes_received));
  bytes.sample(label("direction", "out"), double(h.bytes_sent));
  Family codes(out, "corepool_http_responses_total", "counter",
               "Every response written, by status code, the server's own errors (400, 408, 413, ...) included.");
  for (const auto& [code, n] : h.responses_by_status) codes.sample(label("code", std::to_string(code)), double(n));
}

// The doors: refusals by reason, both wires together (corepool_requests_total
// has them by endpoint and code too); a climbing 401 count is someone guessing.
void render_doors(std::string& out, const ServeSnapshot& s) {
  Family refused(out, "corepool_model_control_refused_total", "counter",
                 "Repository load/unload and shared-memory registration refused: unauthenticated (no or a wrong "
                 "Bearer token, 401) or forbidden (model control off, 403).");
  refused.sample(label("reason", "unauthenticated"), double(s.refused_unauthenticated));
  refused.sample(label("reason", "forbidden"), double(s.refused_forbidden));
  Family(out, "corepool_lame_duck", "gauge", "1 after SIGTERM while readiness answers 503 and requests are still served.")
      .sample("", s.lame_duck ? 1 : 0);
}

// The audio streams (WebSockets and gRPC sequences): per open stream (a
// bounded set: serve.max_streams) and in total since start.
void render_streams(std::string& out, const ServeSnapshot& s) {
  Family(out, "corepool_streams_open", "gauge", "Audio streams open now (WebSocket and gRPC sequences).")
      .sample("", double(s.streams.size()));
  Family(out, "corepool_streams_total", "counter", "Audio streams opened since start.")
      .sample("", double(s.stream_totals.streams));
  Family(out, "corepool_streams_refused_total", "counter", "Streams refused because serve.max_streams were open.")
      .sample("", double(s.streams_refused_full));
  Family ended(out, "corepool_streams_closed_total", "counter", "Streams ended, by how.");
  for (const auto& [how, n] : s.streams_closed) ended.sample(label("how", how), double(n));
  // Each family's samples follow its own HELP and TYPE lines (the text
  // format requires it): one family at a time over the streams.
  const std::string all = label("stream", "all");
  const auto per_stream = [&](const char* name, const char* type, const char* help, auto value) {
    Family family(out, name, type, help);
    for (const StreamStat& st : s.streams) family.sample(label("stream", std::to_string(st.id)), value(st));
    return family;
  };
  per_stream("corepool_stream_audio_seconds", "counter",
             "Audio received by each open stream (seconds at the client's rate); stream=\"all\" since start.",
             [](const StreamStat& st) { return st.audio_seconds; })
      .sample(all, s.stream_totals.audio_seconds);
  per_stream("corepool_stream_events", "counter", "Events sent by each open stream; stream=\"all\" since start.",
             [](const StreamStat& st) { return double(st.events); })
      .sample(all, double(s.stream_totals.events));
  per_stream("corepool_stream_dropped", "counter",
             "Frames a stream dropped because its client did not read them; stream=\"all\" since start.",
             [](const StreamStat& st) { return double(st.dropped); })
      .sample(all, double(s.stream_totals.dropped));
  per_stream("corepool_stream_lag_seconds", "gauge",
             "Audio each open stream has received whose events are not decided yet (its results are not all in).",
             [](const StreamStat& st) { return st.lag_seconds; });
  const HistogramCounts& d = s.stream_decisions;
  Family decision(out, "corepool_stream_decision_seconds", "histogram",
                  "Every stream's decisions: from the moment the last sample of a segment (stateless model) or "
                  "chunk (stateful) reached the server to the moment its result came back from the executor.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < d.bounds.size(); ++i) {
    cumulative += d.counts[i];
    decision.sample(label("le", fmt::format("{}", d.bounds[i])), double(cumulative), "_bucket");
  }
  decision.sample("le=\"+Inf\"", double(d.count), "_bucket");
  decision.sample("", d.sum, "_sum");
  decision.sample("", double(d.count), "_count");
}

// The [[source]]s (a bounded set: the config's tables), one family at a time;
// then GET /v2/events' subscribers.
void render_sources(std::string& out, const ServeSnapshot& s) {
  Family(out, "corepool_event_subscribers", "gauge", "GET /v2/events (Server-Sent Events) connections open.")
      .sample("", double(s.event_subscribers));
  Family(out, "corepool_events_published_total", "counter", "Stream and source events and ends published to /v2/events.")
      .sample("", double(s.events_published));
  Family(out, "corepool_events_dropped_total", "counter",
         "Messages a /v2/events subscriber lost because it did not read them.")
      .sample("", double(s.events_dropped));
  if (s.sources.empty()) return;
  Family state(out, "corepool_source_state", "gauge",
               "1 for the state each [[source]] is in (connecting, running, backoff, finished, stopped).");
  for (const SourceStat& src : s.sources) {
    for (const char* name : {"connecting", "running", "backoff", "finished", "stopped"}) {
      state.sample(label("source", src.name) + "," + label("state", name), src.state == name ? 1 : 0);
    }
  }
  const auto per_source = [&](const char* name, const char* type, const char* help, auto value) {
    Family family(out, name, type, help);
    for (const SourceStat& src : s.sources) family.sample(label("source", src.name), value(src));
  };
  per_source("corepool_source_audio_seconds_total", "counter", "Audio each source decoded since start (seconds).",
             [](const SourceStat& src) { return src.audio_seconds; });
  per_source("corepool_source_events_total", "counter", "Events each source wrote to its sinks.",
             [](const SourceStat& src) { return double(src.events); });
  per_source("corepool_source_reconnects_total", "counter", "Connection attempts after a drop or a failed attempt.",
             [](const SourceStat& src) { return double(src.reconnects); });
  per_source("corepool_source_sink_failures_total", "counter", "Event lines a source's sinks could not write.",
             [](const SourceStat& src) { return double(src.sink_failures); });
  per_source("corepool_source_lag_seconds", "gauge", "Audio each source decoded whose events are not decided yet.",
             [](const SourceStat& src) { return src.lag_seconds; });
}

void render_executor(std::string& out, const ServeSnapshot& s) {
  const ExecutorStats& e = s.executor;
  Family(out, "corepool_info", "gauge", "Constant 1; the labels say what is being served.")
      .sample(label("mode", s.mode) + "," + label("model", s.model), 1);
  Family(out, "corepool_engine_max_batch", "gauge",
         "Segments per forward(); source=\"measured\" when the start-up calibration chose it (engine.max_batch = 0).")
      .sample(label("source", s.max_batch_measured ? "measured" : "configured") + "," + label("optimize", s.optimize),
              double(s.max_batch));
  Family(out, "corepool_generation", "gauge", "1 at start, +1 for each successful reload (SIGHUP).")
      .sample("", double(s.generation));
  Family(out, "corepool_reloads_failed_total", "counter", "Reloads that failed and kept the old model.")
      .sample("", double(s.reloads_failed));
  Family(out, "corepool_queue_depth", "gauge", "Segments queued or running in the executor.")
      .sample("", double(e.outstanding));
  Family(out, "corepool_queue_capacity", "gauge", "The bound on corepool_queue_depth; beyond it requests get 503.")
      .sample("", double(e.depth));
  Family(out, "corepool_audio_requests_pending", "gauge", "/v1/audio:tag requests queued or being decoded.")
      .sample("", double(s.audio_pending));
  Family(out, "corepool_workers_ready", "gauge", "1 when every worker can take work, else 0.")
      .sample("", e.all_ready ? 1 : 0);
  Family busy(out, "corepool_worker_busy_seconds_total", "counter",
              "Seconds each worker spent in feature extraction and forward().");
  for (size_t i = 0; i < e.busy_seconds.size(); ++i) busy.sample(label("worker", std::to_string(i)), e.busy_seconds[i]);
  Family(out, "corepool_worker_restarts_total", "counter", "Worker processes respawned after they died.")
      .sample("", double(e.restarts));
  Family(out, "corepool_segments_redispatched_total", "counter", "Segments sent again after their worker died.")
      .sample("", double(e.redispatched));
  Family(out, "corepool_segments_poisoned_total", "counter", "Segments failed because they killed two workers.")
      .sample("", double(e.poisoned));
  Family(out, "corepool_segments_cancelled_total", "counter",
         "Segments dropped before they ran because their request's deadline passed or it was cancelled.")
      .sample("", double(e.cancelled));
  Family recycles(out, "corepool_worker_recycles_total", "counter",
                  "Workers replaced on purpose, by reason (engine.max_requests, engine.max_rss_mb).");
  recycles.sample(label("reason", "max_requests"), double(e.recycled_max_requests));
  recycles.sample(label("reason", "max_rss"), double(e.recycled_max_rss));
  Family(out, "corepool_requests_timed_out_total", "counter",
         "Infer requests answered 504 (DEADLINE_EXCEEDED) because serve.request_timeout_s or the client's "
         "deadline passed.")
      .sample("", double(s.timed_out));
  Family(out, "corepool_requests_cancelled_total", "counter",
         "Infer and audio requests whose client hung up (or cancelled) before the answer; their queued "
         "segments were dropped.")
      .sample("", double(s.cancelled));
  Family(out, "corepool_results_dropped_total", "counter",
         "Segment results (cancellations included) that came after their request was answered (deadline, "
         "cancel) and "
         "were dropped, this generation.")
      .sample("", double(s.results_dropped));
  Family(out, "corepool_batches_total", "counter", "forward() calls.").sample("", double(e.batches));
  Family(out, "corepool_segments_total", "counter", "Segments (or infer items) run.").sample("", double(e.segments));
}

// One gauge per process from one field of ProcessMemory (kB; -1 = unknown).
void memory_family(std::string& out, const ServeSnapshot& s, const char* name, const char* help,
                   long ProcessMemory::*field) {
  Family family(out, name, "gauge", help);
  for (const auto& [process, m] : s.memory) {
    if (m.*field >= 0) family.sample(label("process", process), double(m.*field) * 1024);
  }
}

void render_memory(std::string& out, const ServeSnapshot& s) {
  memory_family(out, s, "corepool_memory_rss_bytes", "Resident set size by process.", &ProcessMemory::rss_kb);
  memory_family(out, s, "corepool_memory_pss_bytes",
                "Proportional set size by process: shared pages (the weights) split between their users.",
                &ProcessMemory::pss_kb);
  if (s.allocator.empty()) return;
  Family alloc(out, "corepool_allocator_bytes", "gauge", "jemalloc statistics of the supervisor, by stat.");
  for (const auto& [name, v] : s.allocator) alloc.sample(label("stat", name), double(v));
}

}  // namespace

void add_executor_counters(ExecutorStats& into, const ExecutorStats& from) {
  if (into.busy_seconds.size() < from.busy_seconds.size()) into.busy_seconds.resize(from.busy_seconds.size(), 0.0);
  for (size_t i = 0; i < from.busy_seconds.size(); ++i) into.busy_seconds[i] += from.busy_seconds[i];
  into.restarts += from.restarts;
  into.redispatched += from.redispatched;
  into.poisoned += from.poisoned;
  into.batches += from.batches;
  into.segments += from.segments;
  into.cancelled += from.cancelled;
  into.recycled_max_requests += from.recycled_max_requests;
  into.recycled_max_rss += from.recycled_max_rss;
}

void ServeMetrics::observe(const std::string& protocol, const std::string& endpoint, int code, double seconds) {
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(kLatencyBuckets.begin(), kLatencyBuckets.end(), seconds) - kLatencyBuckets.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, code, protocol}];
  Histogram& h = latency_[{endpoint, protocol}];
  if (bucket < h.buckets.size()) ++h.buckets[bucket];
  ++h.count;
  h.sum += seconds;
}

std::string ServeMetrics::render(const ServeSnapshot& snapshot) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Family req(out, "corepool_requests_total", "counter",
               "Requests answered by the API, by endpoint, status code (499: the client left first, nothing "
               "was sent) and protocol.");
    for (const auto& [key, n] : requests_) {
      req.sample(label("endpoint", key.endpoint) + "," + label("code", std::to_string(key.code)) + "," +
                     label("protocol", key.protocol),
                 double(n));
    }
    Family lat(out, "corepool_request_duration_seconds", "histogram",
               "Time from a complete request to its answer, by endpoint and protocol.");
    for (const auto& [key, h] : latency_) {
      const std::string labels = label("endpoint", key.first) + "," + label("protocol", key.second);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < h.buckets.size(); ++i) {
        cumulative += h.buckets[i];
        lat.sample(labels + "," + label("le", fmt::format("{}", kLatencyBuckets[i])), double(cumulative), "_bucket");
      }
      lat.sample(labels + ",le=\"+Inf\"", double(h.count), "_bucket");
      lat.sample(labels, h.sum, "_sum");
      lat.sample(labels, double(h.count), "_count");
    }
  }
  render_http(out, snapshot.http);
  render_doors(out, snapshot);
  render_streams(out, snapshot);
  render_sources(out, snapshot);
  render_executor(out, snapshot);
  render_memory(out, snapshot);
  return out;
}

}  // namespace corepool
