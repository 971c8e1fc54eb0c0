// ModelStreamInfer; see grpc_stream.h. Threads and locks: gRPC's threads run
// the reads and write completions; each sequence's session calls its
// SequenceOutput from its own thread and from executor threads, holding the
// session's lock. So the call's lock (mu_) is taken inside a session's and
// never held while calling a session: streams are copied out, then called.
// One write at a time is gRPC's rule: responses queue in mu_ and the one
// being written is current_. The call ends (Finish) once the client is done
// sending (or the server stops, or the call was cancelled), every sequence's
// output is closed and every response is written; the reactor then lives on
// as long as an output holds it, touching gRPC no more.
#include "supervisor/grpc/grpc_stream.h"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include <grpcpp/impl/codegen/proto_utils.h>

#include "supervisor/grpc/grpc_stream_chunk.h"
#include "supervisor/triton/inference_protocol.h"

namespace corepool::grpc_api {
namespace {

using Clock = std::chrono::steady_clock;

class StreamCall;

// One sequence's results, as responses on its call.
class SequenceOutput final : public StreamOutput {
 public:
  SequenceOutput(std::shared_ptr<StreamCall> call, StreamChunk first, uint64_t token)
      : call_(std::move(call)), first_(std::move(first)), token_(token) {
    first_.pcm.clear();
  }
  bool event(std::string json) override;
  void close(StreamEnd how, const std::string& reason, std::string summary) override;

 private:
  const std::shared_ptr<StreamCall> call_;
  StreamChunk first_;  // the sequence_start request: names every response
  const uint64_t token_;
};

class StreamCall final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                         public std::enable_shared_from_this<StreamCall> {
 public:
  StreamCall(triton::Service& service, AudioStreams* streams, size_t backlog)
      : service_(service), streams_(streams), backlog_(backlog) {}

  void begin(std::shared_ptr<StreamCall> self) {
    self_ = std::move(self);
    StartRead(&in_);
  }

  // Any thread. `droppable`: an event, dropped when backlog_ responses wait
  // already. The queue grows only while a write is pending, i.e. while the
  // client's HTTP/2 window is full: a client that reads never gets here.
  bool send(const inference::ModelStreamInferResponse& response, bool droppable) {
    grpc::ByteBuffer buffer;
    bool own = false;
    if (!grpc::SerializationTraits<google::protobuf::Message>::Serialize(response, &buffer, &own).ok()) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_ || cancelled_) return false;
      if (droppable && queue_.size() >= backlog_) return false;
      queue_.push_back(std::move(buffer));
      if (writing_) return true;
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
    }
    StartWrite(&current_);
    return true;
  }

  // A sequence's output closed: its last response is queued (or not wanted).
  void closed(const StreamChunk& first, uint64_t token, StreamEnd how) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = sequences_.find(first.sequence_name);
    if (it != sequences_.end() && it->second.token == token) sequences_.erase(it);
    --open_;
    if (how == StreamEnd::kServerStop) stopping_ = true;
    finish_if_done(lock);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return client_done();
    handle();
    // Under the lock, so that no Finish comes between the check and the read
    // (gRPC runs a read's reaction on its own threads, never inside StartRead).
    std::lock_guard<std::mutex> lock(mu_);
    if (!cancelled_ && !finished_) StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!ok) queue_.clear();  // the call is broken: nothing more goes out
    if (queue_.empty()) {
      writing_ = false;
      return finish_if_done(lock);
    }
    current_ = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    StartWrite(&current_);
  }

  void OnCancel() override {
    std::vector<std::shared_ptr<AudioStream>> streams;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cancelled_ = true;
      queue_.clear();
      for (auto& [name, seq] : sequences_) streams.push_back(seq.stream);
      sequences_.clear();
      finish_if_done(lock);
    }
    for (auto& s : streams) s->end(StreamEnd::kGone, "the client cancelled the call");
  }

  void OnDone() override {
    std::shared_ptr<StreamCall> self;  // destroyed last: the outputs may hold the call a little longer
    std::lock_guard<std::mutex> lock(mu_);
    service_.observe("grpc", "stream_infer", cancelled_ ? grpc::StatusCode::CANCELLED : grpc::StatusCode::OK,
                     std::chrono::duration<double>(Clock::now() - t0_).count());
    self.swap(self_);
  }

 private:
  struct Sequence {
    std::shared_ptr<AudioStream> stream;
    std::string datatype;
    uint64_t token;
  };

  // The client sent its last request: each sequence still open ends as if it had said sequence_end.
  void client_done() {
    std::vector<std::shared_ptr<AudioStream>> streams;
    {
      std::unique_lock<std::mutex> lock(mu_);
      reads_done_ = true;
      for (auto& [name, seq] : sequences_) streams.push_back(seq.stream);
      sequences_.clear();
      finish_if_done(lock);
    }
    for (auto& s : streams) s->end(StreamEnd::kClientClose, "the client closed the stream");
  }

  // Requires mu_ locked (`lock`); releases it.
  void finish_if_done(std::unique_lock<std::mutex>& lock) {
    const bool done = !finished_ && !writing_ && queue_.empty() && open_ == 0 && (reads_done_ || cancelled_ || stopping_);
    if (!done) return;
    finished_ = true;
    const bool cancelled = cancelled_;
    lock.unlock();
    Finish(cancelled ? grpc::Status::CANCELLED : grpc::Status::OK);
  }

  void handle() {
    inference::ModelInferRequest request;
    grpc::ByteBuffer copy(in_);
    const grpc::Status parsed = grpc::SerializationTraits<inference::ModelInferRequest>::Deserialize(&copy, &request);
    if (!parsed.ok()) {
      send(stream_error(nullptr, "malformed message: not a valid inference.ModelInferRequest"), false);
      return;
    }
    StreamChunk chunk;
    try {
      chunk = to_stream_chunk(request);
    } catch (const oip::ProtocolError& e) {
      send(stream_error(nullptr, request_where(request) + e.what()), false);
      return;
    }
    std::string error = chunk.start ? start_sequence(chunk) : continue_sequence(chunk);
    if (!error.empty()) send(stream_error(&chunk, error), false);
  }

  std::string start_sequence(StreamChunk& chunk) {
    if (!streams_) return "audio streams are off on this server";
    uint64_t token = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (sequences_.count(chunk.sequence_name)) return "sequence_start, but the sequence is open already";
      token = ++tokens_;
    }
    AudioStreams::Opened opened =
        streams_->open(chunk.model, chunk.pcm_query, std::make_unique<SequenceOutput>(shared_from_this(), chunk, token));
    if (!opened.status.ok()) {
      const bool spec = opened.status.code == triton::Code::kInvalidArgument;
      return (spec ? "parameters: " : "") + opened.status.message;
    }
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled = cancelled_;  // OnCancel came while it opened: it ends at once
      if (!cancelled) sequences_[chunk.sequence_name] = Sequence{opened.stream, chunk.datatype, token};
      ++open_;
    }
    opened.stream->start();
    if (cancelled) opened.stream->end(StreamEnd::kGone, "the client cancelled the call");
    feed(opened.stream, chunk);
    return "";
  }

  std::string continue_sequence(StreamChunk& chunk) {
    std::shared_ptr<AudioStream> stream;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sequences_.find(chunk.sequence_name);
      if (it == sequences_.end()) {
        return "no such sequence open; its first request needs parameters.sequence_start = true";
      }
      if (!chunk.datatype.empty() && chunk.datatype != it->second.datatype) {
        return "inputs[0].datatype: " + chunk.datatype + ", but the sequence started as " + it->second.datatype;
      }
      stream = it->second.stream;
      if (chunk.end) sequences_.erase(it);  // its output still closes it (open_)
    }
    feed(stream, chunk);
    return "";
  }

  static void feed(const std::shared_ptr<AudioStream>& stream, StreamChunk& chunk) {
    if (!chunk.pcm.empty()) stream->push(std::move(chunk.pcm));
    if (chunk.end) stream->end(StreamEnd::kEnd, "sequence_end");
  }

  triton::Service& service_;
  AudioStreams* const streams_;
  const size_t backlog_;  // serve.grpc_stream_backlog
  const Clock::time_point t0_ = Clock::now();
  grpc::ByteBuffer in_;  // gRPC's reads: one at a time

  std::mutex mu_;
  std::shared_ptr<StreamCall> self_;             // under mu_: held until OnDone
  std::map<std::string, Sequence> sequences_;    // under mu_: by sequence_name, open to new chunks
  uint64_t tokens_ = 0;                          // under mu_
  int open_ = 0;                                 // under mu_: sequences whose output is not closed
  std::deque<grpc::ByteBuffer> queue_;           // under mu_: responses to write after current_
  grpc::ByteBuffer current_;                     // the one being written, while writing_
  bool writing_ = false;                         // under mu_
  bool reads_done_ = false, cancelled_ = false, stopping_ = false, finished_ = false;  // under mu_
};

bool SequenceOutput::event(std::string json) {
  return call_->send(stream_response(first_, kEventOutput, json, false), true);
}

void SequenceOutput::close(StreamEnd how, const std::string& reason, std::string summary) {
  if (!summary.empty()) {
    call_->send(stream_response(first_, kSummaryOutput, summary, true), false);
  } else if (how != StreamEnd::kGone) {
    call_->send(stream_error(&first_, std::string(stream_end_name(how)) + ": " + reason), false);
  }
  call_->closed(first_, token_, how);
}

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* start_stream_infer(triton::Service& service,
                                                                                 AudioStreams* streams, size_t backlog) {
  auto call = std::make_shared<StreamCall>(service, streams, backlog);
  call->begin(call);
  return call.get();
}

}  // namespace corepool::grpc_api
