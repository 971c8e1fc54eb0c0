// SourceSet: see source_set.h. A runner being stopped flushes its stream,
// which waits for its segments' results: apply() stops the removed runners
// outside the lock, so /v2/sources keeps answering meanwhile.
#include "supervisor/serve/source_set.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "config/config_error.h"

namespace corepool {
namespace {

double ms(double seconds) { return std::round(seconds * 1000) / 1000; }

}  // namespace

SourceSet::SourceSet(triton::Service& service, std::function<std::shared_ptr<Generation>()> current, EventHub* hub)
    : current_(std::move(current)), hub_(hub), streams_(/*max_streams=*/1 << 20, kStreamIdleSeconds, service, current_) {}

void SourceSet::check_models(const std::vector<SourceConfig>& sources, const std::string& served) {
  for (const SourceConfig& s : sources) {
    if (!s.model.empty() && s.model != served) {
      throw ConfigError(source_error(s, "model", "\"" + s.model + "\" is not served: corepool serve serves one model, \"" +
                                                    served + "\" (model.dir); name it or leave model out"));
    }
  }
}

void SourceSet::apply(const std::vector<SourceConfig>& next, const std::string& model) {
  std::vector<std::unique_ptr<SourceRunner>> gone;
  std::vector<SourceRunner*> started;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    const bool renamed = model != model_;  // the runners open streams for the old name: all restart
    model_ = model;
    std::vector<std::unique_ptr<SourceRunner>> kept;
    for (auto& runner : runners_) {
      const bool same = !renamed && std::any_of(next.begin(), next.end(),
                                                [&](const SourceConfig& s) { return runner->config().same(s); });
      (same ? kept : gone).push_back(std::move(runner));
    }
    for (const SourceConfig& s : next) {
      const bool running = std::any_of(kept.begin(), kept.end(), [&](const auto& r) { return r->config().same(s); });
      if (running) continue;
      kept.push_back(std::make_unique<SourceRunner>(s, streams_, model, current_, hub_));
      started.push_back(kept.back().get());
    }
    runners_ = std::move(kept);
  }
  for (auto& runner : gone) {
    spdlog::info("source \"{}\": stopping (removed or changed)", runner->config().name);
    runner->stop();
  }
  gone.clear();
  for (SourceRunner* runner : started) {
    spdlog::info("source \"{}\": starting ({})", runner->config().name, runner->config().url);
    runner->start();
  }
}

std::string SourceSet::list_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& runner : runners_) {
    const SourceStatus s = runner->status();
    nlohmann::ordered_json o = {{"name", s.name},
                                {"url", s.url},
                                {"state", source_state_name(s.state)},
                                {"last_event", nullptr},
                                {"lag_seconds", ms(s.lag_seconds)},
                                {"audio_seconds", ms(s.audio_seconds)},
                                {"events", s.events},
                                {"connections", s.connections},
                                {"reconnects", s.reconnects},
                                {"last_error", s.last_error},
                                {"sink_failures", s.sink_failures}};
    if (!s.last_event.empty()) o["last_event"] = nlohmann::ordered_json::parse(s.last_event, nullptr, false);
    if (s.state == SourceState::kBackoff) o["retry_in_seconds"] = ms(s.retry_in_s);
    list.push_back(std::move(o));
  }
  return nlohmann::ordered_json{{"sources", std::move(list)}}.dump(-1, ' ', false,
                                                                   nlohmann::json::error_handler_t::replace);
}

void SourceSet::fill(ServeSnapshot& snapshot) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& runner : runners_) {
    const SourceStatus s = runner->status();
    snapshot.sources.push_back({s.name, source_state_name(s.state), s.audio_seconds, s.events, s.reconnects,
                                s.lag_seconds, s.sink_failures});
  }
}

void SourceSet::stop() {
  std::vector<std::unique_ptr<SourceRunner>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    all.swap(runners_);
  }
  for (auto& runner : all) runner->stop();  // each flushes its open events to its sinks
  streams_.stop();
}

}  // namespace corepool
