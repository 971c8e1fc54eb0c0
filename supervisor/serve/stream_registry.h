// The WebSocket audio streams of `corepool serve` (/v2/models/NAME/audio/stream):
// the cap (serve.max_streams), the live sessions and their counters for
// /metrics, and the threads to join at shutdown. Owned by ServeProcess;
// routes reserve a slot before the upgrade (a full registry is a 503 there),
// sessions report to it from their own threads. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "supervisor/triton/serve_metrics.h"

namespace corepool {

class StreamSession;

class StreamRegistry {
 public:
  explicit StreamRegistry(int max_streams) : max_streams_(max_streams) {}
  ~StreamRegistry() { stop(); }

  // A slot for a new stream, or false (counted) when max_streams are open.
  bool reserve();
  // The slot's session, once upgraded; or give the slot back (the upgrade failed).
  void add(std::shared_ptr<StreamSession> session);
  void unreserve();
  // A stream refused after its upgrade (bad frames, queue full, ...) by reason, for /metrics.
  void count_closed(const std::string& reason);
  uint64_t next_id() { return ++ids_; }

  // Every open stream's counters and the totals of all, for /metrics.
  void fill(ServeSnapshot& snapshot);
  // Server stop: each stream flushes and closes (1001); joins their threads.
  void stop();

 private:
  void reap();  // requires mu_ unlocked: joins the threads of finished sessions

  const int max_streams_;
  std::mutex mu_;
  int reserved_ = 0;  // under mu_: slots taken, sessions included
  std::vector<std::shared_ptr<StreamSession>> sessions_;  // under mu_
  std::atomic<uint64_t> ids_{0};
  std::atomic<uint64_t> refused_full_{0};
  StreamTotals finished_;  // under mu_: counters of the sessions gone
  std::vector<std::pair<std::string, uint64_t>> closed_;  // under mu_: by reason
};

}  // namespace corepool
