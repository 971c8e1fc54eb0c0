// JsonlSink: see event_sink.h. Each line is flushed as it is written, so a
// reader (tail -f, a log shipper) sees an event as soon as it closes; the
// directory is created on the first write.
#include "supervisor/sources/event_sink.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

namespace corepool {

JsonlSink::~JsonlSink() {
  if (file_) std::fclose(file_);
}

std::string JsonlSink::dated_path(const std::string& path, std::time_t when) {
  std::tm utc{};
  gmtime_r(&when, &utc);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", &utc);
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  if (!has_ext) return path + "-" + date;
  return path.substr(0, dot) + "-" + date + path.substr(dot);
}

bool JsonlSink::open_for(std::time_t now) {
  const std::string want = dated_path(path_, now);
  if (file_ && want == open_path_) return true;
  if (file_) std::fclose(file_);
  file_ = nullptr;
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(want).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_ = std::fopen(want.c_str(), "ae");
  if (!file_) {
    if (failed_path_ != want) spdlog::error("events: cannot open {}: {}", want, std::strerror(errno));
    failed_path_ = want;
    return false;
  }
  open_path_ = want;
  failed_path_.clear();
  return true;
}

void JsonlSink::write(const std::string& line, std::time_t now) {
  if (!open_for(now)) {
    ++failed_;
    return;
  }
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fputc('\n', file_) == EOF ||
      std::fflush(file_) != 0) {
    if (failed_ == 0) spdlog::error("events: cannot write {}: {}", open_path_, std::strerror(errno));
    ++failed_;
  }
}

std::unique_ptr<EventSink> make_jsonl_sink(const std::string& path) { return std::make_unique<JsonlSink>(path); }

}  // namespace corepool
