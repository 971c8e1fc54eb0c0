// Counting is relaxed atomic adds: a reader may see a request counted in
// success before its phases, never a torn number. Rendering reads each
// counter once; nothing here allocates on the recording side.
#include "supervisor/triton/model_statistics.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

namespace corepool {
namespace {

using json = nlohmann::json;

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

template <class D>
json duration_json(const D& d) {
  return {{"count", d.count.load(std::memory_order_relaxed)}, {"ns", d.ns.load(std::memory_order_relaxed)}};
}

}  // namespace

void ModelStatistics::record_success(uint64_t items, uint64_t total_ns, const PhaseNs& phases) {
  success_.add(total_ns);
  queue_.add(phases.queue);
  input_.add(phases.input);
  infer_.add(phases.infer);
  output_.add(phases.output);
  inferences_.fetch_add(items, std::memory_order_relaxed);
  last_inference_ms_.store(now_ms(), std::memory_order_relaxed);
}

void ModelStatistics::record_failure(uint64_t total_ns) {
  fail_.add(total_ns);
  last_inference_ms_.store(now_ms(), std::memory_order_relaxed);
}

void ModelStatistics::record_execution(uint64_t batch, const PhaseNs& phases) {
  executions_.fetch_add(1, std::memory_order_relaxed);
  BatchStat& b = batches_[std::min<uint64_t>(batch, kMaxBatch)];
  b.input.add(phases.input);
  b.infer.add(phases.infer);
  b.output.add(phases.output);
}

std::string ModelStatistics::to_json(const std::string& name, const std::string& version) const {
  json batch_stats = json::array();
  for (size_t size = 1; size < batches_.size(); ++size) {
    const BatchStat& b = batches_[size];
    if (b.infer.count.load(std::memory_order_relaxed) == 0) continue;
    batch_stats.push_back({{"batch_size", size},
                           {"compute_input", duration_json(b.input)},
                           {"compute_infer", duration_json(b.infer)},
                           {"compute_output", duration_json(b.output)}});
  }
  return json{{"name", name},
              {"version", version},
              {"last_inference", last_inference_ms_.load(std::memory_order_relaxed)},
              {"inference_count", inferences_.load(std::memory_order_relaxed)},
              {"execution_count", executions_.load(std::memory_order_relaxed)},
              {"inference_stats",
               {{"success", duration_json(success_)},
                {"fail", duration_json(fail_)},
                {"queue", duration_json(queue_)},
                {"compute_input", duration_json(input_)},
                {"compute_infer", duration_json(infer_)},
                {"compute_output", duration_json(output_)}}},
              {"batch_stats", std::move(batch_stats)}}
      .dump();
}

}  // namespace corepool
