// Triton's statistics extension for one model: what every infer request and
// every forward() of the model cost, cumulated since start (reloads included).
// Owned by ServeService (shared with each Generation, which records the
// executions as their results come back); record_* are called on executor
// threads and take no lock: relaxed atomic adds only. to_json() renders Triton's
// ModelStatistics object for GET /v2/models/{m}/stats and gRPC's ModelStatistics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace corepool {

// Nanoseconds one request (or one execution) spent in each phase.
struct PhaseNs {
  uint64_t queue = 0;    // submitted -> an engine took it (executor queue and shm ring)
  uint64_t input = 0;    // features and copy-in
  uint64_t infer = 0;    // forward()
  uint64_t output = 0;   // copy-out of the scores
};

class ModelStatistics {
 public:
  // Batch sizes counted one by one; a larger batch (never with engine.max_batch
  // in its range) is counted under the last.
  static constexpr size_t kMaxBatch = 1024;

  // An infer request answered with its scores: `items` inferences, `total_ns`
  // from admission to answer, `phases` as its items saw them.
  void record_success(uint64_t items, uint64_t total_ns, const PhaseNs& phases);
  // An infer request for this model that got no scores (queue full, deadline,
  // cancelled, the model failed, not loaded).
  void record_failure(uint64_t total_ns);
  // One forward() of `batch` items (infer items and audio segments alike).
  void record_execution(uint64_t batch, const PhaseNs& phases);

  uint64_t success_count() const { return success_.count.load(std::memory_order_relaxed); }
  uint64_t execution_count() const { return executions_.load(std::memory_order_relaxed); }

  // {"name","version","last_inference","inference_count","execution_count",
  //  "inference_stats":{...},"batch_stats":[...]}: protobuf's JSON form of
  // Triton's ModelStatistics (uint64 as numbers).
  std::string to_json(const std::string& name, const std::string& version) const;

 private:
  struct Duration {  // Triton's StatisticDuration
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> ns{0};
    void add(uint64_t n) {
      count.fetch_add(1, std::memory_order_relaxed);
      ns.fetch_add(n, std::memory_order_relaxed);
    }
  };
  struct BatchStat {
    Duration input, infer, output;
  };

  Duration success_, fail_, queue_, input_, infer_, output_;
  std::atomic<uint64_t> inferences_{0};
  std::atomic<uint64_t> executions_{0};
  std::atomic<uint64_t> last_inference_ms_{0};  // since the epoch, of the last answered request
  std::array<BatchStat, kMaxBatch + 1> batches_;  // index = batch size
};

}  // namespace corepool
