// Where a pulled source's events go (config/source_config.h's EventSinkSpec):
// JsonlSink appends one JSON object a line to a file a UTC day,
// "DIR/NAME.jsonl" becoming "DIR/NAME-2026-11-29.jsonl", opened anew when the
// day of a write differs from the file's. Made and owned by one SourceRunner;
// write() is called under the source's lock, so one call at a time.
#pragma once

#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

namespace corepool {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // One line of JSON, without its newline. Never blocks for long, never throws:
  // a failure is logged (once per file) and counted.
  virtual void write(const std::string& line, std::time_t now) = 0;
  virtual uint64_t failed() const = 0;
};

class JsonlSink final : public EventSink {
 public:
  explicit JsonlSink(std::string path) : path_(std::move(path)) {}
  ~JsonlSink() override;

  // "dir/name.jsonl" on 2026-11-29 (UTC) -> "dir/name-2026-11-29.jsonl"; a
  // name without an extension gets the date at its end ("dir/log" -> "dir/log-2026-11-29").
  static std::string dated_path(const std::string& path, std::time_t when);

  void write(const std::string& line, std::time_t now) override;
  uint64_t failed() const override { return failed_; }
  // The file written last ("" before the first write).
  const std::string& current_path() const { return open_path_; }

 private:
  bool open_for(std::time_t now);

  const std::string path_;
  std::string open_path_;
  std::FILE* file_ = nullptr;
  std::string failed_path_;  // the last path that failed to open: logged once
  uint64_t failed_ = 0;
};

std::unique_ptr<EventSink> make_jsonl_sink(const std::string& path);
// webhook_sink.h; throws std::invalid_argument on a bad URL.
std::unique_ptr<EventSink> make_webhook_sink(const std::string& url, double backoff_s, double backoff_max_s);

}  // namespace corepool
