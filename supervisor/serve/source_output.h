// What a [[source]]'s runner (source_runner.h) and the outputs of its
// streams share: the sinks, the status, the lock and the condition the
// runner waits on; and that output, which writes each event as a line of
// every sink (and publishes it to /v2/events) and the summary as the
// connection's last line. Event lines carry the source, the connection (1,
// 2, ... one per connect) and the times from that connection's start, plus
// for a network source "time": the wall clock (UTC) at the connection's
// start plus "start". Shared (shared_ptr) by the runner and its sessions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "supervisor/serve/event_hub.h"
#include "supervisor/serve/source_runner.h"
#include "supervisor/sources/event_sink.h"
#include "supervisor/triton/audio_streams.h"

namespace corepool {

class StreamSessionBase;

// How one stream of a connection ended, as its output tells the runner.
struct LegEnd {
  bool closed = false;  // under SourceShared::mu: the session's output had its last call
  StreamEnd how = StreamEnd::kEnd;
  std::string reason;
};

struct SourceShared {
  std::string name;
  EventHub* hub = nullptr;
  mutable std::mutex mu;
  std::condition_variable cv;  // a leg closed, or stop
  std::vector<std::unique_ptr<EventSink>> sinks;  // under mu
  SourceStatus status;                             // under mu
  std::chrono::steady_clock::time_point retry_at;                     // under mu: in backoff, the next attempt
  std::weak_ptr<StreamSessionBase> session;            // under mu: the current connection's, for its lag

  void write(const std::string& line);  // under mu: to every sink
};

// A stream's output for connection `connection`, its events from `offset_s`
// on in the connection's audio; `live`: the audio arrives as it is heard
// (network sources), so lines get "time".
std::unique_ptr<StreamOutput> make_source_output(std::shared_ptr<SourceShared> shared, std::shared_ptr<LegEnd> end,
                                                 uint64_t connection, double offset_s, bool live);

}  // namespace corepool
