// What every StatefulScorer shares: the block interface's refusal for scorers
// that need a stream whole, and the choice between the two kinds.
#include "supervisor/batch/stateful_scorer.h"

#include <stdexcept>

#include "supervisor/batch/split_scorer.h"
#include "supervisor/batch/stream_scorer.h"

namespace corepool {
namespace {

[[noreturn]] void whole_only() { throw std::logic_error("this stateful scorer takes whole streams only (add())"); }

}  // namespace

void StatefulScorer::open(uint64_t, std::shared_ptr<const std::vector<float>>, int64_t) { whole_only(); }
void StatefulScorer::extend(uint64_t, std::shared_ptr<const std::vector<float>>) { whole_only(); }
void StatefulScorer::close(uint64_t, const std::string&) { whole_only(); }

std::unique_ptr<StatefulScorer> make_stateful_scorer(const ModelConfig& model, StatefulScorer::Done done) {
  if (model.stateful.split.enabled() && model.stateful.lane_seconds <= 0) {
    return std::make_unique<SplitScorer>(model, std::move(done));
  }
  return std::make_unique<StreamScorer>(model, std::move(done));
}

}  // namespace corepool
