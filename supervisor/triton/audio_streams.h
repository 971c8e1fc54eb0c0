// The audio streams of `corepool serve` as a wire sees them: open one for a
// model (AudioStreams, serve's StreamRegistry), push it PCM pieces and its
// end (AudioStream, serve's StreamSession), and get its events back through
// the StreamOutput the wire gave it. The WebSocket route (supervisor/serve/
// ws_stream.h) and ModelStreamInfer (supervisor/grpc/grpc_stream.h) are the
// two wires; the stream's logic is one (StreamSession). Header only, so that
// the gRPC adapter needs neither the audio code nor LibTorch.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "supervisor/triton/triton_service.h"

namespace corepool {

// How a stream ended. The first four flush: the audio queued is tagged, the
// open events are sent, then the summary. The others drop what is queued.
enum class StreamEnd {
  kEnd,          // the client said so ({"end": true}, sequence_end)
  kClientClose,  // the client closed its side
  kIdle,         // no audio for serve.stream_idle_s
  kServerStop,   // the server shuts down
  kBadMessage,   // a message the wire does not take (WebSocket text other than {"end": true})
  kQueueFull,    // more audio waiting than StreamSession::kQueueSeconds
  kBadAudio,     // PCM that is not whole frames, or holds NaN / Inf
  kFailed,       // a segment failed in the executor
  kGone,         // the connection is gone: nothing more can be sent
};

inline bool flushes(StreamEnd how) {
  return how == StreamEnd::kEnd || how == StreamEnd::kClientClose || how == StreamEnd::kIdle ||
         how == StreamEnd::kServerStop;
}

// The name in the summary's "end" and in /metrics' corepool_streams_closed_total{how}.
inline const char* stream_end_name(StreamEnd how) {
  switch (how) {
    case StreamEnd::kEnd: return "end";
    case StreamEnd::kClientClose: return "client_close";
    case StreamEnd::kIdle: return "idle";
    case StreamEnd::kServerStop: return "server_stop";
    case StreamEnd::kBadMessage: return "bad_message";
    case StreamEnd::kQueueFull: return "queue_full";
    case StreamEnd::kBadAudio: return "bad_audio";
    case StreamEnd::kFailed: return "failed";
    case StreamEnd::kGone: return "gone";
  }
  return "unknown";
}

// Why an idle stream was ended, as every wire says it.
inline std::string idle_reason(int idle_s) {
  return "idle: no audio for " + std::to_string(idle_s) + " s (serve.stream_idle_s)";
}

// Where a stream's results go: the wire's side. The session calls it from
// its own thread and from executor threads, one call at a time (under its
// lock), never after close(); so no call may block or call the stream back.
class StreamOutput {
 public:
  virtual ~StreamOutput() = default;
  // One event as it closes: {"start","end","label","score"} as JSON text.
  // False when it was dropped because the client does not read.
  virtual bool event(std::string json) = 0;
  // The last call. `summary` is {"model","duration","segments","events",
  // "dropped","end"} as JSON text when the stream was flushed, "" when it
  // was not (then `reason` says why).
  virtual void close(StreamEnd how, const std::string& reason, std::string summary) = 0;
};

// One open stream, as its wire drives it; every method may be called from any
// thread and returns at once.
class AudioStream {
 public:
  virtual ~AudioStream() = default;
  // Starts tagging; call once, after the wire has told its client the stream is open.
  virtual void start() = 0;
  // A piece of PCM in the stream's format (any length; the session checks it).
  virtual void push(std::string&& pcm) = 0;
  // The first end wins; a flushing end still tags what was pushed before it.
  virtual void end(StreamEnd how, std::string reason) = 0;
  // A result the wire dropped after event() took it (its client does not read).
  virtual void dropped() = 0;
};

class AudioStreams {
 public:
  struct Opened {
    triton::Status status;  // kNotFound / kUnavailable (model), kInvalidArgument (spec), kResourceExhausted (cap)
    std::shared_ptr<AudioStream> stream;  // not started
  };
  // A stream of `model` fed with PCM as `pcm_query` says ("sample_rate=16000&
  // channels=1&format=s16le", audio/pcm_stream.h's parse_pcm_query), its
  // results going to `output`. Counts against serve.max_streams until it ends.
  virtual Opened open(const std::string& model, std::string_view pcm_query, std::unique_ptr<StreamOutput> output) = 0;

 protected:
  ~AudioStreams() = default;
};

}  // namespace corepool
