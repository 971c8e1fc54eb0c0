// POST /v1/audio:tag for `corepool serve`: a bounded queue of request bodies
// and a few decoder threads that run stages 1-2 of the pipeline (validate,
// decode, downmix, resample, segment) from memory and submit the segments to
// the generation's executor, blocking while its queue is full. Stage 4 (events)
// runs as results come back; the reply is the events in time order, like
// `corepool batch` writes them. The HTTP loop only enqueues: a full queue is a
// 503, so memory stays bounded by max_pending bodies plus the executor queue.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "supervisor/triton/serve_generation.h"
#include "supervisor/serve/serve_reply.h"

namespace corepool {

// The client of one audio request left (its connection closed): cancel()
// comes from the HTTP loop at any point of the job, before the decoder took
// it, while it decodes, or while its segments run. Shared by the route and the job.
class AudioCancel {
 public:
  void cancel();
  bool cancelled() const;
  // The job's running part: called once by cancel(), or at once if cancel()
  // came first. Cleared (set to null) when the job is answered.
  void set_on_cancel(std::function<void()> fn);

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  std::function<void()> on_cancel_;
};

class AudioTagger {
 public:
  struct Job {
    std::shared_ptr<Generation> generation;
    std::shared_ptr<const std::string> body;  // the audio file's bytes
    Reply reply;
    std::shared_ptr<AudioCancel> cancel = std::make_shared<AudioCancel>();
  };

  AudioTagger(int threads, size_t max_pending);
  ~AudioTagger();  // stop(): queued jobs are answered 503
  AudioTagger(const AudioTagger&) = delete;
  AudioTagger& operator=(const AudioTagger&) = delete;

  // False (nothing taken) when max_pending jobs are queued or decoding.
  bool enqueue(Job&& job);
  size_t pending() const;
  // Requests whose client left before the answer (their queued segments dropped).
  uint64_t cancelled() const { return cancelled_->load(); }
  // Finishes the jobs being decoded, answers the queued ones 503, joins.
  void stop();

 private:
  void run();
  void tag(Job& job);

  const size_t max_pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  size_t decoding_ = 0;
  bool stopping_ = false;
  std::shared_ptr<std::atomic<uint64_t>> cancelled_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::vector<std::thread> threads_;
};

}  // namespace corepool
