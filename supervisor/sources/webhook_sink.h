// A [[source]]'s "webhook:http://HOST:PORT/PATH" sink (event_sink.h): each
// line POSTed as application/json, one connection a line, from a thread of
// the sink's own, so that write() never waits on the network. The queue is
// bounded (kQueueLines): past it a line is dropped and counted. A failed
// POST (no connection, a timeout, a 5xx) is retried after a back-off
// (backoff.h) until it goes through; a 4xx is the receiver refusing that
// line: it is dropped and counted. Made and owned by one SourceRunner;
// destroying it waits for the POST in flight (its connect, send and answer
// each bounded by kTimeoutMs) and drops what is still queued, counted.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "config/source_config.h"
#include "supervisor/sources/event_sink.h"

namespace corepool {

class WebhookSink final : public EventSink {
 public:
  static constexpr size_t kQueueLines = 1024;
  static constexpr int kTimeoutMs = 2000;  // connect, send, answer: each

  WebhookSink(const std::string& url, double backoff_s, double backoff_max_s);
  ~WebhookSink() override;

  void write(const std::string& line, std::time_t now) override;
  uint64_t failed() const override;
  uint64_t delivered() const;

 private:
  void run();
  // "" when the receiver answered 2xx; else why not. `refused`: a 4xx (do not retry).
  std::string post(const std::string& body, bool& refused);

  const std::string url_;
  const WebhookUrl target_;
  const double backoff_s_, backoff_max_s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;  // under mu_
  bool stop_ = false;              // under mu_
  uint64_t failed_ = 0;            // under mu_: dropped (queue full, refused, left at stop)
  uint64_t delivered_ = 0;         // under mu_
  std::string last_error_;         // the runner thread: logged when it changes
  std::thread thread_;
};

}  // namespace corepool
