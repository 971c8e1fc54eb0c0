// The prefix of every log line corepool writes to stderr, supervisor and
// workers alike (setup_logging, make_worker_logger): "[W] " always, and under
// journald also "<4>", the syslog priority that systemd strips and stores as
// the line's PRIORITY (SyslogLevelPrefix=, on by default), so that
// `journalctl -p warning` shows warnings and errors only.
#pragma once

#include <spdlog/pattern_formatter.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace corepool {

// `%*`: "<N>", N the syslog priority of the message's spdlog level.
class SyslogPriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    // trace, debug, info, warn, err, critical, off
    static constexpr char kPriority[] = {'7', '7', '6', '4', '3', '2', '6'};
    const char text[] = {'<', kPriority[msg.level], '>'};
    dest.append(text, text + sizeof text);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPriorityFlag>(); }
};

// systemd.exec(5): stderr is the journal when its "device:inode" is the one in
// JOURNAL_STREAM (a child that redirected stderr keeps the variable, not the stream).
inline bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  unsigned long long dev = 0, ino = 0;
  struct stat st {};
  if (!stream || std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2 || ::fstat(2, &st) != 0) return false;
  return dev == st.st_dev && ino == st.st_ino;
}

// `pattern` as it is, or with the priority in front when stderr is the journal.
inline std::unique_ptr<spdlog::formatter> make_log_formatter(const std::string& pattern) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<SyslogPriorityFlag>('*');
  formatter->set_pattern(stderr_is_journal() ? "%*" + pattern : pattern);
  return formatter;
}

}  // namespace corepool
