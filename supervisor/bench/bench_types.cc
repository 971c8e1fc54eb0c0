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

std::string SweepPoint::label() const {
  const std::string intra = intra_op == 0 ? "default" : std::to_string(intra_op);
  return kind + " w" + std::to_string(workers) + " intra " + intra + " " + allocator;
}

}  // namespace corepool
