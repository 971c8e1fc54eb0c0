// The audio streams of `corepool serve` (WebSockets at /v2/models/NAME/audio/
// stream, sequences of gRPC's ModelStreamInfer): opens them (AudioStreams),
// keeps the cap (serve.max_streams), the live sessions and their counters for
// /metrics, and the threads to join at shutdown. Owned by ServeProcess; the
// wires open streams here (a full registry is their refusal), sessions
// report to it from their own threads. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "audio/pcm_stream.h"
#include "supervisor/triton/audio_streams.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/serve_metrics.h"
#include "supervisor/triton/triton_service.h"

namespace corepool {

class StreamSessionBase;

class StreamRegistry final : public AudioStreams {
 public:
  // `current`: the generation new streams go to; `service` says whether a model is ready.
  StreamRegistry(int max_streams, int idle_s, triton::Service& service,
                 std::function<std::shared_ptr<Generation>()> current)
      : max_streams_(max_streams), idle_s_(idle_s), service_(service), current_(std::move(current)) {}
  ~StreamRegistry() { stop(); }

  Opened open(const std::string& model, std::string_view pcm_query, std::unique_ptr<StreamOutput> output) override;
  // Wraps every stream's output as it opens (GET /v2/events: EventHub::tap). Set before the first open().
  void set_tap(std::function<std::unique_ptr<StreamOutput>(std::unique_ptr<StreamOutput>, const std::string& model)> tap) {
    tap_ = std::move(tap);
  }
  // A stream that ended, by how (stream_end_name), for /metrics.
  void count_closed(const std::string& how);
  // A stream gives its slot back: called once, before its last response goes
  // out, so that a client that saw its stream end may open another at once
  // under serve.max_streams (the session's thread is joined later, in reap).
  void release();
  // A decision's time (a segment's or chunk's last sample in -> its result
  // back), for /metrics' corepool_stream_decision_seconds. Any thread.
  void observe_decision(double seconds) { decisions_.observe(seconds); }

  // Every open stream's counters and the totals of all, for /metrics.
  void fill(ServeSnapshot& snapshot);
  // Server stop: each stream flushes and closes (kServerStop); joins their
  // threads. Streams opened later are refused.
  void stop();

 private:
  bool reserve();  // a slot for a new stream, or false (counted) when max_streams are open
  void reap();     // requires mu_ unlocked: joins the threads of finished sessions
  // The session the model's kind takes (throws as the sessions' constructors do).
  std::shared_ptr<StreamSessionBase> make_session(std::shared_ptr<Generation> gen, const PcmSpec& spec,
                                                  std::unique_ptr<StreamOutput> output);

  const int max_streams_;
  const int idle_s_;
  triton::Service& service_;
  const std::function<std::shared_ptr<Generation>()> current_;
  std::function<std::unique_ptr<StreamOutput>(std::unique_ptr<StreamOutput>, const std::string&)> tap_;
  std::mutex mu_;
  bool stopped_ = false;  // under mu_
  int reserved_ = 0;  // under mu_: slots taken, by sessions not yet released included
  std::vector<std::shared_ptr<StreamSessionBase>> sessions_;  // under mu_
  std::atomic<uint64_t> ids_{0};
  std::atomic<uint64_t> refused_full_{0};
  StreamTotals finished_;  // under mu_: counters of the sessions gone
  std::vector<std::pair<std::string, uint64_t>> closed_;  // under mu_: by reason
  LatencyHistogram decisions_{kDecisionBuckets};
};

}  // namespace corepool
