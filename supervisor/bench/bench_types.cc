// The kinds of point and a configuration's label: the names that --modes,
// the sweep's progress lines and the verdict print; a point's phases as JSON.
#include "supervisor/bench/bench_types.h"

namespace corepool {

const std::vector<std::string> kBenchKinds = {"ceiling-threads", "ceiling-processes", "thread", "process",
                                              "defaults", "plain", "bf16"};

nlohmann::json phases_to_json(const PointSummary::Phases& p) {
  if (p.mean_batch <= 0) return nlohmann::json::object();
  return {{"input_ms", p.input_ms}, {"infer_ms", p.infer_ms}, {"output_ms", p.output_ms},
          {"other_ms", p.other_ms}, {"mean_batch", p.mean_batch}};
}

PointSummary::Phases phases_from_json(const nlohmann::json& j) {
  if (j.empty()) return {};
  return {j.at("input_ms"), j.at("infer_ms"), j.at("output_ms"), j.at("other_ms"), j.at("mean_batch")};
}

bool tune_skips_bf16(const std::vector<std::string>& asked_optimizes, const std::string& bf16_isa) {
  return asked_optimizes.empty() && bf16_isa.empty();
}

bool quick_bench_skips_bf16(const BenchOptions& o, const std::string& bf16_isa) {
  return o.quick && o.modes.empty() && o.optimize != "bf16" && bf16_isa.empty();
}

std::string bf16_skipped_note(const std::string& how_to_ask) {
  return "engine.optimize = bf16 not measured: this CPU has neither AVX512_BF16 nor AMX-BF16, and oneDNN would "
         "emulate it (2.4-14x slower than none on CNN10, bench/RESULTS.md); " + how_to_ask + " measures it anyway";
}

std::string bf16_emulated_note() {
  return "engine.optimize = bf16 is emulated on this CPU (neither AVX512_BF16 nor AMX-BF16): 2.4-14x slower than "
         "none on CNN10 (bench/RESULTS.md); its points log errors only";
}

std::string SweepPoint::label() const {
  const std::string intra = intra_op == 0 ? "default" : std::to_string(intra_op);
  return kind + " w" + std::to_string(workers) + " intra " + intra + " " + allocator;
}

}  // namespace corepool
