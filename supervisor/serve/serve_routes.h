// The API of `corepool serve`: maps each request (on the HTTP loop thread) to
// its endpoint and answers it, or hands it on (infer to the executor, audio to
// the AudioTagger) to be answered later. Never blocks: whatever would wait is
// answered 503 with Retry-After instead. An infer request still unanswered at
// its deadline (serve.request_timeout_s) is answered 504 and cancelled.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "supervisor/serve/deadline_timer.h"
#include "supervisor/http/http_server.h"
#include "supervisor/serve/serve_audio.h"
#include "supervisor/serve/serve_generation.h"
#include "supervisor/serve/serve_metrics.h"

namespace corepool {

// What the routes need from the server around them.
class ServeContext {
 public:
  virtual std::shared_ptr<Generation> current() = 0;  // the generation new requests go to
  virtual ServeSnapshot snapshot() = 0;               // everything /metrics shows but the request counts

 protected:
  ~ServeContext() = default;
};

class ServeRoutes {
 public:
  ServeRoutes(ServeContext& context, ServeMetrics& metrics, AudioTagger& audio, int retry_after_s);
  void handle(HttpRequest&& request, Responder responder);
  // Infer requests answered 504 because serve.request_timeout_s passed.
  uint64_t timed_out() const { return timed_out_->load(); }

 private:
  void infer(HttpRequest& request, const Reply& reply, const std::shared_ptr<Generation>& gen);
  void audio_tag(HttpRequest& request, const Reply& reply, std::shared_ptr<Generation> gen);

  ServeContext& context_;
  ServeMetrics& metrics_;
  AudioTagger& audio_;
  const int retry_after_s_;
  std::shared_ptr<std::atomic<uint64_t>> timed_out_ = std::make_shared<std::atomic<uint64_t>>(0);
  DeadlineTimer deadlines_;  // last: its thread stops (and drops what is pending) first
};

}  // namespace corepool
