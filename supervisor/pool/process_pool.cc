// ProcessPool::Impl, the facade behind the Executor seam: sizes the pool,
// shares the weights, and owns the parts (each file says its own job):
// Submissions and PoolMirror (any thread, a mutex each), WorkerTable and
// Dispatcher (loop thread), SupervisorLoop (the libuv thread running supervise()).
// Completions are delivered on the loop thread (or an inline try_submit()).
#include "supervisor/pool/process_pool.h"

#include <algorithm>

#include "shm/channel.h"
#include "shm/segment.h"
#include "supervisor/pool/dispatch.h"
#include "supervisor/pool/pool_mirror.h"
#include "supervisor/pool/submissions.h"
#include "supervisor/pool/supervisor_loop.h"
#include "supervisor/pool/worker_table.h"
#include "worker/shared_weights.h"

namespace corepool {
namespace {

ProcessPoolOptions normalized(ProcessPoolOptions options, const shm::ChannelLayout& layout) {
  options.workers = std::max(options.workers, 1);
  // A batch never holds more requests than the slab has slots, nor than the
  // worker's running list has places.
  options.max_batch = std::clamp<int>(options.max_batch, 1, static_cast<int>(layout.batch_limit()));
  return options;
}

size_t queue_depth(const ProcessPoolOptions& o) {
  return o.queue_depth > 0 ? o.queue_depth : 4 * static_cast<size_t>(o.workers * o.max_batch);
}

}  // namespace

// A stateful model's task and result carry its state too, and a split's
// sequence many chunks (slot_task_floats(), slot_result_floats()).
shm::ChannelLayout channel_layout(const ModelConfig& config, uint32_t max_batch) {
  return shm::ChannelLayout::for_model(static_cast<uint32_t>(config.slot_task_floats()),
                                       static_cast<uint32_t>(config.item_floats()),
                                       static_cast<uint32_t>(config.slot_result_floats()), max_batch);
}

class ProcessPool::Impl {
 public:
  Impl(std::shared_ptr<const LoadedModel> model, ProcessPoolOptions options, Completion on_complete)
      : model_(std::move(model)),
        layout_(channel_layout(model_->config, static_cast<uint32_t>(std::max(options.max_batch, 1)))),
        options_(normalized(std::move(options), layout_)),
        submissions_(queue_depth(options_)),
        mirror_(options_.workers),
        table_(options_, layout_, model_, mirror_),
        dispatcher_(options_, layout_, static_cast<uint32_t>(model_->config.slot_result_floats()),
                    std::move(on_complete), submissions_, mirror_),
        loop_(table_, dispatcher_, submissions_) {}

  void start() {
    shm::sweep_dead_segments();
    // One read-only copy of the weights before any worker exists; the module is
    // rebound to it, so every fork inherits views, not copies.
    // (After engine.optimize, optimize_model() has done so already, in its arena.)
    if (!options_.naive_weights && !weights_already_shared(*model_)) {
      weights_ = std::make_unique<SharedWeights>(share_weights(*model_));
    }
    loop_.start(weights_.get());
    mirror_.wait_ready(std::chrono::milliseconds(options_.start_timeout_ms), options_.start_on_first_ready);
  }

  void submit(SegmentTask task) {
    submissions_.submit(std::move(task));
    loop_.wake();
  }
  bool try_submit(std::vector<SegmentTask>& tasks) { return loop_.try_submit(tasks); }
  void cancel(uint64_t stream) {
    if (submissions_.cancel(stream)) loop_.wake();
  }
  void wait_idle() { submissions_.wait_idle(); }
  int workers() const { return options_.workers; }
  const pool::PoolMirror& mirror() const { return mirror_; }

  ExecutorStats stats() const {
    ExecutorStats s;
    s.outstanding = submissions_.outstanding();
    s.depth = submissions_.depth();
    mirror_.fill(s);
    return s;
  }

 private:
  // Declaration order is destruction order reversed: the loop stops (and
  // reaps every worker) before the table unmaps the channels and the weights go.
  std::shared_ptr<const LoadedModel> model_;
  const shm::ChannelLayout layout_;     // before options_: it bounds their max_batch
  const ProcessPoolOptions options_;
  std::unique_ptr<SharedWeights> weights_;
  pool::Submissions submissions_;
  pool::PoolMirror mirror_;
  pool::WorkerTable table_;
  pool::Dispatcher dispatcher_;
  pool::SupervisorLoop loop_;
};

ProcessPool::ProcessPool(std::shared_ptr<const LoadedModel> model, ProcessPoolOptions options, Completion on_complete)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options), std::move(on_complete))) {
  impl_->start();
}

ProcessPool::~ProcessPool() {
  if (impl_) impl_->wait_idle();
}

void ProcessPool::submit(SegmentTask task) { impl_->submit(std::move(task)); }
bool ProcessPool::try_submit(std::vector<SegmentTask>& tasks) { return impl_->try_submit(tasks); }
ExecutorStats ProcessPool::stats() const { return impl_->stats(); }
void ProcessPool::wait_idle() { impl_->wait_idle(); }
void ProcessPool::cancel(uint64_t stream) { impl_->cancel(stream); }
int ProcessPool::workers() const { return impl_->workers(); }
std::vector<int> ProcessPool::worker_pids() const { return impl_->mirror().pids(); }
bool ProcessPool::all_ready() const { return impl_->mirror().all_ready(); }
PoolCounters ProcessPool::counters() const { return impl_->mirror().counters(); }

}  // namespace corepool
