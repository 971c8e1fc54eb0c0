// make_log_formatter (worker/log_format.h): under journald (JOURNAL_STREAM
// naming stderr) every line starts with its syslog priority, elsewhere with
// nothing new; a JOURNAL_STREAM that names another stream is ignored.
#include "worker/log_format.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace corepool {
namespace {

std::string format(spdlog::level::level_enum level) {
  const auto formatter = make_log_formatter("%^[%L]%$ %v");
  const spdlog::details::log_msg msg("test", level, "hello");
  spdlog::memory_buf_t out;
  formatter->format(msg, out);
  return std::string(out.data(), out.size());
}

void set_journal_stream_to_stderr() {
  struct stat st {};
  ASSERT_EQ(::fstat(2, &st), 0);
  const std::string value = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  ::setenv("JOURNAL_STREAM", value.c_str(), 1);
}

class LogFormatTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv("JOURNAL_STREAM"); }
};

TEST_F(LogFormatTest, WithoutJournalStreamALineHasNoPriority) {
  ::unsetenv("JOURNAL_STREAM");
  EXPECT_EQ(format(spdlog::level::warn).rfind("[W] hello", 0), 0u);
}

TEST_F(LogFormatTest, UnderJournaldEachLevelStartsWithItsSyslogPriority) {
  set_journal_stream_to_stderr();
  EXPECT_EQ(format(spdlog::level::debug).rfind("<7>[D] hello", 0), 0u);
  EXPECT_EQ(format(spdlog::level::info).rfind("<6>[I] hello", 0), 0u);
  EXPECT_EQ(format(spdlog::level::warn).rfind("<4>[W] hello", 0), 0u);
  EXPECT_EQ(format(spdlog::level::err).rfind("<3>[E] hello", 0), 0u);
  EXPECT_EQ(format(spdlog::level::critical).rfind("<2>[C] hello", 0), 0u);
}

TEST_F(LogFormatTest, AJournalStreamThatIsNotStderrIsIgnored) {
  ::setenv("JOURNAL_STREAM", "1:2", 1);  // what a child whose stderr was redirected still inherits
  EXPECT_EQ(format(spdlog::level::warn).rfind("[W] hello", 0), 0u);
}

}  // namespace
}  // namespace corepool
