// libFuzzer target: model.toml text into load_model_config (config/model_config.cc).
// Any input must either load or throw ConfigError. A model config that loads
// must be usable as is (one threshold per label, segments of at least one
// sample) and must survive to_toml() and a reload unchanged, since the model
// generator writes model.toml with to_toml().
#include <cstddef>
#include <cstdint>

#include "config/model_config.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

void check_usable(const corepool::ModelConfig& m) {
  if (m.labels.empty() || m.thresholds.size() != m.labels.size()) {
    corepool::fuzz::fail("labels and thresholds disagree");
  }
  if (m.segment_samples() < 1 || m.hop_samples() < 1 || m.item_floats() < 1) {
    corepool::fuzz::fail("a loaded model has empty segments or items");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static corepool::fuzz::InputFile file;
  corepool::ModelConfig first;
  try {
    first = corepool::load_model_config(file.write(data, size));
  } catch (const corepool::ConfigError&) {
    return 0;  // the expected answer to bad input
  }
  check_usable(first);
  const std::string text = corepool::to_toml(first);
  corepool::ModelConfig again;
  try {
    again = corepool::load_model_config(file.write(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  } catch (const corepool::ConfigError& e) {
    corepool::fuzz::fail(std::string("to_toml() wrote a model.toml that does not load: ") + e.what());
  }
  if (corepool::to_toml(again) != text) corepool::fuzz::fail("to_toml() and load_model_config() disagree");
  return 0;
}
