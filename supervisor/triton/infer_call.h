// One infer request in flight, whatever the wire: its items go to the
// generation's executor all together or not at all, and exactly one of
// three things answers it: the last result (kOk or kInternal), its deadline
// (kDeadlineExceeded: queued segments dropped) or cancel() (kCancelled: the
// client is gone; queued segments dropped). Made by ServeService::infer();
// holds its generation until answered, so a reload never pulls the executor
// from under it. Results arrive on executor threads, the deadline on the
// DeadlineTimer's, cancel() on any.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "supervisor/triton/deadline_timer.h"
#include "supervisor/triton/model_statistics.h"
#include "supervisor/triton/serve_generation.h"
#include "supervisor/triton/triton_service.h"

namespace corepool {

// What every call reports into; shared by the service and its calls, so a
// call answered late (at shutdown) never counts into freed memory.
struct InferCounters {
  ModelStatistics stats;
  std::atomic<uint64_t> timed_out{0};  // answered kDeadlineExceeded
  std::atomic<uint64_t> cancelled{0};  // cancel() before the answer
};

class ServeInferCall final : public triton::InferCall, public std::enable_shared_from_this<ServeInferCall> {
 public:
  using Clock = std::chrono::steady_clock;

  ServeInferCall(std::shared_ptr<Generation> gen, triton::InferOutput header, size_t items, triton::InferDone done,
                 std::shared_ptr<InferCounters> counters, std::weak_ptr<DeadlineTimer> deadlines);

  // Submits every item or none: answered kResourceExhausted at once when the
  // queue has no room for all. Otherwise the call runs; `deadline` (if any)
  // answers it then, naming `deadline_source` ("serve.request_timeout_s = 60 s").
  // Call once, right after make_shared.
  void start(std::vector<std::vector<float>>&& items, std::optional<Clock::time_point> deadline,
             std::string deadline_source);
  void cancel() override;

 private:
  void on_result(SegmentResult&& r);
  void expire();
  // Requires mu_: closes the stream, drops the deadline and the generation.
  // False when it was closed already (the call is answered).
  bool close_locked();
  void answer(triton::Status status);

  std::mutex mu_;
  std::shared_ptr<Generation> gen_;  // reset once answered
  triton::InferOutput out_;          // model, version, id; scores as they come
  triton::InferDone done_;
  const std::shared_ptr<InferCounters> counters_;
  const std::weak_ptr<DeadlineTimer> deadlines_;
  const Clock::time_point start_ = Clock::now();
  std::string deadline_source_;
  uint64_t stream_ = 0;
  DeadlineTimer::Id deadline_ = 0;
  size_t done_items_ = 0;
  std::string error_;
  PhaseNs phases_;  // the slowest item's, phase by phase
};

}  // namespace corepool
