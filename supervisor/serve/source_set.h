// The [[source]]s of `corepool serve`: one SourceRunner each, started at
// start, changed by a reload without touching the sources that did not
// change, stopped (flushed) at shutdown; /v2/sources and /metrics read them.
// Sources open their streams in a StreamRegistry of their own, so that they
// neither count against serve.max_streams nor are refused by it. Owned by
// ServeProcess; apply() and stop() from its main thread, the readers from any.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/source_config.h"
#include "supervisor/serve/source_runner.h"
#include "supervisor/serve/stream_registry.h"
#include "supervisor/triton/serve_metrics.h"

namespace corepool {

class SourceSet {
 public:
  // How long a source's stream may go without audio before it is ended
  // (the runner's read timeout notices a silent input first).
  static constexpr int kStreamIdleSeconds = 3600;

  // `hub` (may be null) gets every source's event lines (GET /v2/events); it outlives the set.
  SourceSet(triton::Service& service, std::function<std::shared_ptr<Generation>()> current, EventHub* hub);
  ~SourceSet() { stop(); }

  // Throws ConfigError (file, line, source, key) when a source names a model
  // other than `served`, the one model serve serves.
  static void check_models(const std::vector<SourceConfig>& sources, const std::string& served);
  // Starts the sources new in `next`, stops those gone, restarts those
  // changed; a source whose table is the same keeps running untouched.
  void apply(const std::vector<SourceConfig>& next, const std::string& model);
  // [{"name","url","state","last_event","lag_seconds",...}] as JSON text.
  std::string list_json() const;
  void fill(ServeSnapshot& snapshot) const;
  // Each source flushes its open events and stops; later apply()s start nothing.
  void stop();

 private:
  const std::function<std::shared_ptr<Generation>()> current_;
  EventHub* const hub_;
  StreamRegistry streams_;
  mutable std::mutex mu_;  // guards runners_ for the readers; apply() and stop() are one thread's
  std::vector<std::unique_ptr<SourceRunner>> runners_;
  std::string model_;  // under mu_: the model the runners open their streams for
  bool stopped_ = false;
};

}  // namespace corepool
