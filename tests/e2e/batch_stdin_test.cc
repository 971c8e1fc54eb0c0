// `corepool batch -`: the real binary with a pipe as its stdin (and, for the
// streaming test, a pipe as its stdout). Raw PCM, a WAV and an Ogg piped in
// give the events of the same audio as a file; with --out - an event reaches
// stdout while the input is still open; garbage, an empty stdin, an MP4 with
// its index at the end and a bad --raw each get one clear line. The Ogg and
// MP4 cases need the ffmpeg command-line tool (skipped, with the reason, without).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/ffmpeg_cli.h"
#include "tests/support/process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait.h"
#include "tools/audio_synth.h"
#include "tools/sound_classes.h"
#include "worker/model/model.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kRate = 16000;

using testing::ffmpeg;
using testing::have_ffmpeg;
std::vector<std::string> batch_argv(std::vector<std::string> args) {
  args.insert(args.begin(), {COREPOOL_BIN, "--log-level", "warn", "batch", "--model", COREPOOL_DEFAULT_MODEL,
                             "--no-progress"});
  return args;
}

// The demo as raw s16le, as `arecord -f S16_LE -r 16000` would send it.
std::string demo_s16le() {
  const std::vector<float> samples = synth::demo_samples(kRate);
  std::string bytes(samples.size() * 2, '\0');
  for (size_t i = 0; i < samples.size(); ++i) {
    const float v = std::max(-1.0f, std::min(1.0f, samples[i]));
    const auto s = static_cast<int16_t>(std::lrint(v * 32767.0f));
    bytes[2 * i] = char(uint16_t(s) & 0xff);
    bytes[2 * i + 1] = char(uint16_t(s) >> 8);
  }
  return bytes;
}

// A pipe whose ends close themselves.
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    read = fds[0];
    write = fds[1];
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() {
    if (read >= 0) ::close(read);
    read = -1;
  }
  void close_write() {
    if (write >= 0) ::close(write);
    write = -1;
  }
};

// Writes all of `bytes`; false if the reader went away (EPIPE: SIGPIPE is ignored).
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(size_t(n));
  }
  return true;
}

// Reads `fd` into `text` until `done(text)` holds, the writer closes it, or
// the deadline passes. Returns done(text).
bool read_until(int fd, std::string& text, const std::function<bool(const std::string&)>& done,
                testing::Clock::time_point deadline) {
  char buf[4096];
  while (!done(text)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - testing::Clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    const int rc = ::poll(&pfd, 1, int(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, size_t(n));
  }
  return done(text);
}

// The event lines (not the summary) of JSON Lines output.
std::vector<json> events_of(const std::string& out) {
  std::vector<json> events;
  for (const std::string& line : testing::lines_of(out)) {
    const json j = json::parse(line);
    if (!j.contains("summary")) events.push_back(j);
  }
  return events;
}

class BatchStdinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);  // a child that died makes write() fail, not this process
    synth::write_samples(dir_ / "demo.wav", synth::demo_samples(kRate), kRate);
    hop_ = load_model(COREPOOL_DEFAULT_MODEL)->config.hop_seconds;
  }

  // corepool batch with `file` as its stdin (stdout and stderr collected).
  testing::ProcessResult batch_with_stdin(const std::vector<std::string>& args, const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << file;
    testing::SpawnOptions options;
    options.stdin_fd = fd;
    const testing::Spawned child = testing::spawn_process_with(batch_argv(args), dir_.path(), options);
    ::close(fd);
    return testing::wait_process(child, 5min);
  }

  // The demo WAV's events, given as a file.
  std::vector<json> file_events() {
    const testing::ProcessResult r =
        testing::run_process(batch_argv({"--out", "-", dir_ / "demo.wav"}), dir_.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return events_of(r.out);
  }

  void expect_same_events(const std::vector<json>& got, const std::vector<json>& want) {
    ASSERT_GE(want.size(), 3u) << "the demo has four parts";
    ASSERT_EQ(got.size(), want.size()) << json(got).dump() << "\nwant " << json(want).dump();
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i]["file"], "stdin");
      EXPECT_EQ(got[i]["label"], want[i]["label"]);
      EXPECT_NEAR(got[i]["start"].get<double>(), want[i]["start"].get<double>(), hop_);
      EXPECT_NEAR(got[i]["end"].get<double>(), want[i]["end"].get<double>(), hop_);
    }
  }

  testing::TempDir dir_;
  double hop_ = 0;
};

TEST_F(BatchStdinTest, AnEventReachesStdoutBeforeTheInputEndsAndTheWholeRunMatchesTheFile) {
  const std::string pcm = demo_s16le();
  Pipe in, out;
  testing::SpawnOptions options;
  options.stdin_fd = in.read;
  options.stdout_fd = out.write;
  const testing::Spawned child = testing::spawn_process_with(
      batch_argv({"--raw", "s16le:16000:1", "--out", "-", "-"}), dir_.path(), options);
  in.close_read();
  out.close_write();

  // The first half: 14 s, speech (0-8 s) and most of the music. The speech
  // event closes within it; it must be on stdout while stdin is still open.
  const size_t half = (pcm.size() / 2) & ~size_t(1);
  ASSERT_TRUE(write_all(in.write, std::string_view(pcm).substr(0, half)));
  std::string text;
  const bool got_line = read_until(
      out.read, text, [](const std::string& t) { return t.find('\n') != std::string::npos; }, testing::after(2min));
  ASSERT_TRUE(got_line) << "no event on stdout after half the stream; got: " << text;
  const json first = json::parse(text.substr(0, text.find('\n')));
  EXPECT_FALSE(first.contains("summary")) << first.dump();
  EXPECT_EQ(first["label"], "speech") << first.dump();

  ASSERT_TRUE(write_all(in.write, std::string_view(pcm).substr(half)));
  in.close_write();
  read_until(out.read, text, [](const std::string&) { return false; }, testing::after(2min));  // to EOF
  const testing::ProcessResult r = testing::wait_process(child, 1min);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");

  expect_same_events(events_of(text), file_events());
  const json summary = json::parse(testing::lines_of(text).back());
  EXPECT_NEAR(summary.at("summary").at("duration").get<double>(), 28.0, 0.01);
}

TEST_F(BatchStdinTest, AWavPipedInGivesTheFilesEvents) {
  const testing::ProcessResult r = batch_with_stdin({"--out", "-", "-"}, dir_ / "demo.wav");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_events(events_of(r.out), file_events());
}

TEST_F(BatchStdinTest, AnOggPipedInGivesTheFilesEvents) {
  if (!have_ffmpeg()) GTEST_SKIP() << "the ffmpeg command-line tool is not installed (make deps)";
  ASSERT_TRUE(ffmpeg("-i " + (dir_ / "demo.wav") + " -c:a libvorbis " + (dir_ / "demo.ogg")));
  const testing::ProcessResult r = batch_with_stdin({"--out", "-", "-"}, dir_ / "demo.ogg");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_events(events_of(r.out), file_events());
}

TEST_F(BatchStdinTest, WithAnOutputDirectoryStdinIsWrittenToStdinJsonl) {
  const testing::ProcessResult r = batch_with_stdin({"--out", dir_ / "results", "-"}, dir_ / "demo.wav");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  expect_same_events(events_of(testing::read_file(dir_ / "results/stdin.jsonl")), file_events());
}

TEST_F(BatchStdinTest, GarbageOnStdinGetsOneClearLineAndExitCode1) {
  std::string garbage(100000, '\0');
  uint32_t x = 12345;
  for (char& c : garbage) c = char((x = x * 1103515245u + 12345u) >> 24);
  std::ofstream(dir_ / "garbage.bin", std::ios::binary) << garbage;
  const testing::ProcessResult r = batch_with_stdin({"--out", "-", "-"}, dir_ / "garbage.bin");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "error: stdin: not an audio file (format not recognised)\n");
}

TEST_F(BatchStdinTest, AnEmptyStdinGetsOneClearLine) {
  std::ofstream(dir_ / "empty.wav").close();
  for (const std::vector<std::string>& raw : {std::vector<std::string>{}, {"--raw", "s16le:16000:1"}}) {
    std::vector<std::string> args = raw;
    args.insert(args.end(), {"--out", "-", "-"});
    SCOPED_TRACE(json(args).dump());
    const testing::ProcessResult r = batch_with_stdin(args, dir_ / "empty.wav");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "error: stdin: empty (no data on standard input)\n");
  }
}

TEST_F(BatchStdinTest, AnMp4WithItsIndexAtTheEndSaysToUseFaststartOrTheFile) {
  if (!have_ffmpeg()) GTEST_SKIP() << "the ffmpeg command-line tool is not installed (make deps)";
  ASSERT_TRUE(ffmpeg("-i " + (dir_ / "demo.wav") + " -c:a aac " + (dir_ / "demo.m4a")));
  const testing::ProcessResult r = batch_with_stdin({"--out", "-", "-"}, dir_ / "demo.m4a");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(testing::lines_of(r.err).size(), 1u) << r.err;
  EXPECT_THAT(r.err, HasSubstr("error: stdin: "));
  EXPECT_THAT(r.err, HasSubstr("cannot be read from a pipe"));
  EXPECT_THAT(r.err, HasSubstr("-movflags +faststart"));

  // The same audio with its index first streams.
  ASSERT_TRUE(ffmpeg("-i " + (dir_ / "demo.m4a") + " -c copy -movflags +faststart " + (dir_ / "fast.m4a")));
  const testing::ProcessResult fast = batch_with_stdin({"--out", "-", "-"}, dir_ / "fast.m4a");
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  expect_same_events(events_of(fast.out), file_events());
}

TEST_F(BatchStdinTest, ABadRawSpecIsACliErrorNamingTheFlag) {
  for (const char* spec : {"s16le:16000", "u8:16000:1", "s16le:abc:1", "s16le:16000:0", "f32le:16000:1:2"}) {
    SCOPED_TRACE(spec);
    const testing::ProcessResult r = batch_with_stdin({"--raw", spec, "--out", "-", "-"}, dir_ / "demo.wav");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, HasSubstr(std::string("--raw ") + spec + ": expected FORMAT:RATE:CHANNELS"));
  }
}

TEST_F(BatchStdinTest, RawF32GivesTheSameEventsAsTheFile) {
  const std::vector<float> samples = synth::demo_samples(kRate);
  std::ofstream(dir_ / "demo.f32", std::ios::binary)
      .write(reinterpret_cast<const char*>(samples.data()), std::streamsize(samples.size() * sizeof(float)));
  const testing::ProcessResult r = batch_with_stdin({"--raw", "f32le:16000:1", "--out", "-", "-"}, dir_ / "demo.f32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_events(events_of(r.out), file_events());
}

}  // namespace
}  // namespace corepool
