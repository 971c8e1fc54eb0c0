// The activation figure is what a worker keeps beyond the weights: the peak of
// one forward() at max_batch. jemalloc counts it exactly per thread
// (thread.peak, jemalloc >= 5.3); on the system allocator the process's RSS
// high-water mark, reset through /proc/self/clear_refs, stands in.
#include "supervisor/doctor/doctor_model.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include "supervisor/doctor/doctor_optimize.h"
#include "supervisor/doctor/doctor_procfs.h"
#include "worker/engine.h"
#include "worker/engine_plan.h"

namespace corepool {
namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

// Peak heap growth of the calling thread between start() and peak().
class PeakMeter {
 public:
  PeakMeter() : mallctl_(reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"))) {}

  void start() {
    if (mallctl_ && mallctl_("thread.peak.reset", nullptr, nullptr, nullptr, 0) == 0) return;
    mallctl_ = nullptr;
    // "5" resets VmHWM to the current RSS (proc(5), since Linux 4.0).
    std::ofstream("/proc/self/clear_refs") << "5";
    rss_before_ = status_bytes("VmRSS").value_or(0);
  }

  uint64_t peak() const {
    uint64_t value = 0;
    size_t size = sizeof value;
    if (mallctl_ && mallctl_("thread.peak.read", &value, &size, nullptr, 0) == 0) return value;
    const uint64_t hwm = status_bytes("VmHWM").value_or(0);
    return hwm > rss_before_ ? hwm - rss_before_ : 0;
  }

  bool exact() const { return mallctl_ != nullptr; }
  const char* method() const { return exact() ? "jemalloc thread.peak" : "RSS high-water mark"; }

 private:
  static std::optional<uint64_t> status_bytes(const std::string& key) {
    return meminfo_bytes(read_whole_file("/proc/self/status").value_or(""), key);
  }

  Mallctl mallctl_;
  uint64_t rss_before_ = 0;
};

std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    default:
      return c10::toString(type);
  }
}

// A TorchScript error carries both tracebacks over many lines. Its first line
// says where ("The following operation failed in the TorchScript
// interpreter.", or our "model.pt: not a loadable TorchScript module"), its
// last what ("RuntimeError: Input type (float) and bias type (double) should
// be the same"); a doctor line keeps those two.
std::string one_line(const std::string& text) {
  const size_t end = text.find_last_not_of(" \n");
  const size_t first_break = text.find('\n');
  if (end == std::string::npos || first_break >= end) return text.substr(0, end == std::string::npos ? 0 : end + 1);
  const size_t last_begin = text.rfind('\n', end) + 1;
  return text.substr(0, first_break) + " ... " + text.substr(last_begin, end + 1 - last_begin);
}

CheckResult weights_check(const LoadedModel& model) {
  std::map<std::string, uint64_t> bytes_by_dtype;
  size_t tensors = 0;
  auto count = [&](const torch::Tensor& t) {
    bytes_by_dtype[dtype_name(t.scalar_type())] += t.nbytes();
    ++tensors;
  };
  for (const auto& p : module_of(model).parameters()) count(p);
  for (const auto& b : module_of(model).buffers()) count(b);
  return model_verdict(model.dir, bytes_by_dtype, tensors);
}

// One forward() of `batch` silent segments through the engine, as a worker runs it.
CheckResult forward_check(const std::shared_ptr<const LoadedModel>& model, int batch, uint64_t& activation_bytes) {
  // A stateful model's line names its kind: one call of its method on silent chunks and zero states.
  const std::string kind = stateful_text(model->config);
  const std::string what = kind.empty() ? "forward() of " + std::to_string(batch) + " silent segment(s)"
                                        : kind + ": one call on " + std::to_string(batch) + " silent chunk(s)";
  std::string error;
  try {
    Engine engine(model);
    const std::vector<float> silence(static_cast<size_t>(model->config.task_floats()), 0.0f);
    const std::vector<const float*> segments(static_cast<size_t>(batch), silence.data());
    PeakMeter meter;
    meter.start();
    const auto begin = std::chrono::steady_clock::now();
    engine.infer(segments);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    if (!meter.exact()) {
      // RSS also grew by the library code the first call faulted in, which
      // every worker shares: measure a second call.
      meter.start();
      engine.infer(segments);
    }
    activation_bytes = meter.peak();
    char timing[64];
    std::snprintf(timing, sizeof timing, " took %.0f ms (first call), ", ms);
    return CheckResult::ok("forward", what + timing + human_bytes(activation_bytes) + " activations (" +
                                          meter.method() + ")");
  } catch (const c10::Error& e) {
    error = e.what_without_backtrace();
  } catch (const std::exception& e) {
    error = e.what();
  }
  return CheckResult::fail("forward", model->dir + "/model.pt: " + what + " failed: " + one_line(error),
                           "forward() must take float32 input as model.toml describes and return [batch, labels] "
                           "(README, Models)");
}

}  // namespace

CheckResult model_verdict(const std::string& dir, const std::map<std::string, uint64_t>& bytes_by_dtype,
                          size_t tensors) {
  uint64_t total = 0;
  std::string dtypes;
  for (const auto& [dtype, bytes] : bytes_by_dtype) {
    total += bytes;
    dtypes += (dtypes.empty() ? "" : ", ") + dtype + " " + human_bytes(bytes);
  }
  const std::string found = dir + ": " + std::to_string(tensors) + " weight tensors, " + human_bytes(total) +
                            (dtypes.empty() ? "" : " (" + dtypes + ")");
  const auto doubles = bytes_by_dtype.find("float64");
  if (doubles != bytes_by_dtype.end() && doubles->second > 0) {
    return CheckResult::warn("model", found + ": float64 weights double memory and halve SIMD throughput",
                             "convert to float32 before saving: module.to(torch::kFloat) (Python: model.float())");
  }
  return CheckResult::ok("model", found);
}

ModelProbe probe_model(const std::string& dir, int max_batch, const std::string& optimize,
                       const std::string& kernels) {
  ModelProbe probe;
  try {
    probe.model = load_model(dir);
  } catch (const ModelError& e) {
    probe.results.push_back(CheckResult::fail(
        "model", one_line(e.what()), "point --model (or [model] dir) at a directory holding model.pt and model.toml"));
    return probe;
  }
  probe.results.push_back(weights_check(*probe.model));
  try {
    probe.results.push_back(plan_check(probe.model, optimize, kernels, max_batch, probe.plan));
    if (probe.results.back().verdict != Verdict::kFail) probe.results.push_back(kernels_check(probe.plan));
  } catch (const std::exception& e) {  // the calibration's forward() failed: forward_check says why
    probe.plan.max_batch = std::max(1, max_batch);
  }
  const int batch = std::max(1, std::min(probe.plan.max_batch, probe.model->config.max_batch));
  probe.results.push_back(forward_check(probe.model, batch, probe.activation_bytes));
  probe.forward_ok = probe.results.back().verdict == Verdict::kOk;
  // engine.optimize does not apply to a stateful model (optimize.cc): nothing to compare.
  if (probe.forward_ok && probe.model->config.is_stateful()) {
    probe.results.push_back(CheckResult::ok("bf16", "not applicable: a stateful model runs as loaded (fp32)"));
  } else if (probe.forward_ok) {
    probe.results.push_back(bf16_check(dir));
  }
  return probe;
}

}  // namespace corepool
