// One audio stream of `corepool serve` for a stateful model (model.toml's
// [model] kind = "stateful", e.g. Silero VAD), whichever wire feeds it. The
// stream owns its state: its next chunk goes to the executor only when the
// previous chunk's result brought the new state back, and the state travels
// inside the task (worker/stateful_task.h, as the batch driver's StreamScorer
// sends it), so the executor batches the chunks of many streams into one call
// and a chunk re-dispatched after its worker died still carries its state.
// Chunk probabilities become speech events by the batch driver's rules
// (audio/speech_events.h's SpeechTracker, one per label), each sent as it
// closes. The base (stream_session_base.h) does the queue, the PCM, the idle
// timeout and the ending. Made by StreamRegistry::open().
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "audio/speech_events.h"
#include "supervisor/serve/stream_session_base.h"

namespace corepool {

class StatefulSession final : public StreamSessionBase {
 public:
  // Throws std::runtime_error when soxr refuses the rates.
  StatefulSession(uint64_t id, std::shared_ptr<Generation> generation, const PcmSpec& spec,
                  std::unique_ptr<StreamOutput> output, StreamRegistry& registry, int idle_s);
  ~StatefulSession() override { join(); }

 private:
  void take_samples(const std::vector<float>& samples, Clock::time_point arrived, bool last) override;
  void on_wake() override;  // a result came: a failed chunk ends the stream, else the next one goes
  void on_result(SegmentResult&& r) override;  // executor threads
  void flush_and_close(const Ending& ending) override;
  bool submit_next();  // the stream's thread: the next chunk if it is whole (or the tail) and none is in flight
  Clock::time_point arrival_of(int64_t sample);  // when the audio up to `sample` had come
  void send_spans(size_t label, const std::vector<SpeechSpan>& spans);  // under mu_

  const int64_t chunk_;
  const int64_t context_;

  bool in_flight_ = false;             // under mu_: a chunk is at the executor
  uint64_t in_flight_index_ = 0;       // under mu_
  Clock::time_point in_flight_arrived_;  // under mu_: when its last sample came
  std::vector<float> state_;           // under mu_: what the next chunk starts from
  int64_t chunks_done_ = 0;            // under mu_
  std::vector<SpeechTracker> trackers_;  // under mu_: one per label

  // The stream's thread only:
  std::vector<float> buffer_;  // the context (context_len_ samples), then the audio not yet sent
  int64_t context_len_ = 0;    // 0 at the stream's start: no context before the first chunk
  int64_t samples_in_ = 0;     // at the model's rate
  int64_t next_chunk_ = 0;
  bool tail_ = false;          // the stream ended: a last partial chunk goes zero-padded
  std::deque<std::pair<int64_t, Clock::time_point>> arrivals_;  // (samples_in_ after a piece, when it came)
};

}  // namespace corepool
