// Unit tests for the pieces of serve's [[source]]s that need no server:
// the reconnect back-off schedule (supervisor/sources/backoff.h) and the
// JSONL sink's daily file names and rotation (supervisor/sources/event_sink.h).
#include "supervisor/sources/backoff.h"
#include "supervisor/sources/event_sink.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace corepool {
namespace {

constexpr std::time_t kNov29Noon = 1795953600;  // 2026-11-29T12:00:00Z
constexpr std::time_t kDay = 86400;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Backoff, WaitsDoubleFromTheBaseUpToTheCap) {
  Backoff b(1, 60);
  std::vector<double> waits;
  for (int i = 0; i < 8; ++i) waits.push_back(b.next());
  EXPECT_EQ(waits, (std::vector<double>{1, 2, 4, 8, 16, 32, 60, 60}));
}

TEST(Backoff, AHealthyRunStartsTheScheduleOver) {
  Backoff b(0.5, 4);
  b.next();
  b.next();
  b.next();
  b.reset();
  EXPECT_DOUBLE_EQ(b.next(), 0.5);
  EXPECT_DOUBLE_EQ(b.next(), 1);
}

TEST(Backoff, ACapBelowTheBaseIsTheBase) {
  Backoff b(2, 1);
  EXPECT_DOUBLE_EQ(b.next(), 2);
  EXPECT_DOUBLE_EQ(b.next(), 2);
}

TEST(JsonlSink, TheFileNameGetsTheUtcDateBeforeItsExtension) {
  EXPECT_EQ(JsonlSink::dated_path("/var/lib/corepool/events/radio.jsonl", kNov29Noon),
            "/var/lib/corepool/events/radio-2026-11-29.jsonl");
  EXPECT_EQ(JsonlSink::dated_path("events/log", kNov29Noon), "events/log-2026-11-29");
  EXPECT_EQ(JsonlSink::dated_path("a.b/log", kNov29Noon), "a.b/log-2026-11-29");
  EXPECT_EQ(JsonlSink::dated_path("/x/.hidden", kNov29Noon), "/x/.hidden-2026-11-29");
  EXPECT_EQ(JsonlSink::dated_path("r.jsonl", kNov29Noon - 12 * 3600 - 1), "r-2026-11-28.jsonl");
}

TEST(JsonlSink, LinesGoToTheFileOfTheirDayAndANewDayOpensANewFile) {
  testing::TempDir dir("corepool-sink");
  JsonlSink sink(dir / "sub/radio.jsonl");  // the directory is made on the first write
  sink.write(R"({"a":1})", kNov29Noon);
  sink.write(R"({"a":2})", kNov29Noon + 3600);
  EXPECT_EQ(sink.current_path(), dir / "sub/radio-2026-11-29.jsonl");
  sink.write(R"({"a":3})", kNov29Noon + kDay);
  EXPECT_EQ(sink.current_path(), dir / "sub/radio-2026-11-30.jsonl");
  EXPECT_EQ(read(dir / "sub/radio-2026-11-29.jsonl"), "{\"a\":1}\n{\"a\":2}\n");
  EXPECT_EQ(read(dir / "sub/radio-2026-11-30.jsonl"), "{\"a\":3}\n");
  EXPECT_EQ(sink.failed(), 0u);
}

TEST(JsonlSink, AFileThatCannotBeOpenedIsCountedNotThrown) {
  testing::TempDir dir("corepool-sink");
  std::ofstream(dir / "file") << "x";
  JsonlSink sink(dir / "file/radio.jsonl");  // a regular file where the directory should be
  sink.write("{}", kNov29Noon);
  sink.write("{}", kNov29Noon);
  EXPECT_EQ(sink.failed(), 2u);
}

}  // namespace
}  // namespace corepool
