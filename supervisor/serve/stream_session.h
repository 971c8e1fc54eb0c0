// One audio stream of `corepool serve` for a stateless model, whichever wire
// feeds it (a WebSocket at /v2/models/NAME/audio/stream, ws_stream.h; a
// sequence of gRPC's ModelStreamInfer, supervisor/grpc/grpc_stream.h): PCM in,
// events out as each closes. The base (stream_session_base.h) queues the
// wire's pieces and runs the stream's thread, which mixes and resamples them;
// here the samples are cut by a Segmenter and the segments submitted to the
// generation's executor, blocking while that queue is full; results come back
// on executor threads into an EventBuilder whose events go straight to the
// wire's StreamOutput. At the end (the client's, the idle timeout, the
// server's stop) the open events are flushed and the output is closed with the
// summary. Made by StreamRegistry::open().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "audio/events.h"
#include "audio/segmenter.h"
#include "supervisor/serve/stream_session_base.h"

namespace corepool {

class StreamSession final : public StreamSessionBase {
 public:
  // Throws std::runtime_error when soxr refuses the rates.
  StreamSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s);
  ~StreamSession() override { join(); }

 private:
  void take_samples(const std::vector<float>& samples, Clock::time_point arrived, bool last) override;
  void on_result(SegmentResult&& r) override;  // executor threads
  void flush_and_close(const Ending& ending) override;

  uint64_t submitted_ = 0, completed_ = 0;  // under mu_
  std::set<uint64_t> done_ahead_;  // under mu_: results in, past the first missing index (for the lag)
  uint64_t done_below_ = 0;        // under mu_: every result below this index is in
  std::map<uint64_t, Clock::time_point> arrived_;  // under mu_: when each segment in flight had its last sample
  EventBuilder builder_;           // under mu_

  Segmenter segmenter_;  // the stream's thread only
};

}  // namespace corepool
