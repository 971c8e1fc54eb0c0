#include "supervisor/triton/serve_generation.h"

#include "supervisor/pool/executor_factory.h"

namespace corepool {

Generation::Generation(uint64_t number, Config config, std::shared_ptr<const LoadedModel> model,
                       std::shared_ptr<ModelStatistics> stats)
    : number_(number), config_(std::move(config)), model_(std::move(model)), stats_(std::move(stats)) {
  executor_ = make_executor_factory(config_, model_, &plan_)([this](SegmentResult&& r) { route(std::move(r)); });
}

Generation::~Generation() {
  if (!executor_) return;
  executor_->wait_idle();
  executor_.reset();
}

uint64_t Generation::open_stream(Sink sink) {
  const uint64_t id = next_stream_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  streams_.emplace(id, std::make_shared<Sink>(std::move(sink)));
  return id;
}

void Generation::close_stream(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(id);
}

size_t Generation::open_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return streams_.size();
}

void Generation::route(SegmentResult&& result) {
  // One forward() is counted once: by the item it ran first, whoever asked for it.
  const SegmentTiming& t = result.timing;
  if (stats_ && t.batch > 0 && t.batch_pos == 0) {
    stats_->record_execution(t.batch, {0, t.input_ns, t.infer_ns, t.output_ns});
  }
  std::shared_ptr<Sink> sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(result.stream);
    if (it == streams_.end()) {
      ++dropped_;
      return;
    }
    sink = it->second;
  }
  // Outside the lock: the sink may close its own stream.
  (*sink)(std::move(result));
}

}  // namespace corepool
