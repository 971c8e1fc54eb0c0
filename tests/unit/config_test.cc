// Unit tests for load_config() (config/config.cc) and, through it, TomlReader:
// the shipped config/corepool.toml must equal the built-in defaults, and every
// kind of mistake must name file, line and key. Each test owns a temp dir.
#include "config/config.h"
#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace corepool {
namespace {

namespace fs = std::filesystem;

// The documented defaults file, found from this source file's location (CMake
// compiles sources by absolute path, so __FILE__ is absolute).
const fs::path kDefaultsFile = fs::path(__FILE__).parent_path() / "../../config/corepool.toml";

class ConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text, const std::string& name = "corepool.toml") {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // The ConfigError message for `text`, or "" when it loads.
  std::string error_for(const std::string& text) {
    try {
      load_config(write(text));
    } catch (const ConfigError& error) {
      return error.what();
    }
    return "";
  }

  std::string path() const { return (dir_ / "corepool.toml").string(); }

  testing::TempDir temp_{"corepool-config"};
  const fs::path dir_ = temp_.path();
};

void expect_same(const Config& actual, const Config& expected) {
  EXPECT_EQ(actual.model_dir, expected.model_dir);
  EXPECT_EQ(actual.mode, expected.mode);
  EXPECT_EQ(actual.kernels, expected.kernels);
  EXPECT_EQ(actual.workers, expected.workers);
  EXPECT_EQ(actual.intra_op_threads, expected.intra_op_threads);
  EXPECT_EQ(actual.inter_op_threads, expected.inter_op_threads);
  EXPECT_EQ(actual.max_batch, expected.max_batch);
  EXPECT_EQ(actual.optimize, expected.optimize);
  EXPECT_EQ(actual.queue_depth, expected.queue_depth);
  EXPECT_EQ(actual.pin_threads, expected.pin_threads);
  EXPECT_EQ(actual.max_batch_delay_us, expected.max_batch_delay_us);
  EXPECT_EQ(actual.hang_timeout_ms, expected.hang_timeout_ms);
  EXPECT_EQ(actual.max_requests, expected.max_requests);
  EXPECT_EQ(actual.max_rss_mb, expected.max_rss_mb);
  EXPECT_EQ(actual.request_timeout_s, expected.request_timeout_s);
  EXPECT_EQ(actual.out_dir, expected.out_dir);
  EXPECT_EQ(actual.force, expected.force);
  EXPECT_EQ(actual.log_level, expected.log_level);
  EXPECT_EQ(actual.listen, expected.listen);
  EXPECT_EQ(actual.unix_socket, expected.unix_socket);
  EXPECT_EQ(actual.unix_socket_group, expected.unix_socket_group);
  EXPECT_EQ(actual.max_body_mb, expected.max_body_mb);
  EXPECT_EQ(actual.max_connections, expected.max_connections);
  EXPECT_EQ(actual.idle_timeout_s, expected.idle_timeout_s);
  EXPECT_EQ(actual.header_timeout_s, expected.header_timeout_s);
  EXPECT_EQ(actual.body_timeout_s, expected.body_timeout_s);
  EXPECT_EQ(actual.drain_timeout_s, expected.drain_timeout_s);
  EXPECT_EQ(actual.max_audio_requests, expected.max_audio_requests);
  EXPECT_EQ(actual.audio_threads, expected.audio_threads);
  EXPECT_EQ(actual.retry_after_s, expected.retry_after_s);
  EXPECT_EQ(actual.grpc_listen, expected.grpc_listen);
  EXPECT_EQ(actual.grpc_max_message_mb, expected.grpc_max_message_mb);
  EXPECT_EQ(actual.allow_client_shm, expected.allow_client_shm);
  EXPECT_EQ(actual.client_shm_group, expected.client_shm_group);
}

TEST_F(ConfigTest, ShippedDefaultsFileLoadsToExactlyTheBuiltInDefaults) {
  ASSERT_TRUE(fs::exists(kDefaultsFile)) << kDefaultsFile;
  expect_same(load_config(kDefaultsFile.string()), Config{});
}

TEST_F(ConfigTest, ShippedDefaultsFileSetsEveryKeyItDocuments) {
  // Written out in full so a key added to Config but not to the file shows up here.
  std::ifstream in(kDefaultsFile);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* key : {"dir =", "mode =", "workers =", "intra_op_threads =", "inter_op_threads =",
                          "max_batch =", "optimize =", "kernels =", "queue_depth =", "pin_threads =",
                          "max_batch_delay_us =", "hang_timeout_ms =", "allocator =", "out_dir =", "force =", "level =",
                          "listen =", "unix_socket =", "unix_socket_group =", "max_body_mb =", "max_connections =",
                          "idle_timeout_s =", "header_timeout_s =", "body_timeout_s =",
                          "drain_timeout_s =", "max_audio_requests =", "audio_threads =",
                          "retry_after_s =", "max_requests =", "max_rss_mb =", "request_timeout_s =",
                          "grpc_listen =", "grpc_max_message_mb =", "allow_client_shm =", "client_shm_group ="}) {
    EXPECT_NE(text.find(std::string("\n") + key), std::string::npos) << key;
  }
}

TEST_F(ConfigTest, EmptyFileYieldsTheDefaults) {
  expect_same(load_config(write("")), Config{});
}

TEST_F(ConfigTest, EveryKeyIsReadFromTheFile) {
  const Config config = load_config(write(R"(
[model]
dir = "/srv/models/vad"
[engine]
mode = "process"
workers = 6
intra_op_threads = 2
inter_op_threads = 3
max_batch = 16
optimize = "bf16"
queue_depth = 500
pin_threads = false
max_batch_delay_us = 2000
hang_timeout_ms = 1500
max_requests = 1000
max_rss_mb = 2048
[batch]
out_dir = "/tmp/out"
force = true
[serve]
listen = "[::1]:9000"
unix_socket = "/run/corepool/x.sock"
unix_socket_group = "corepool-clients"
max_body_mb = 8
max_connections = 100
idle_timeout_s = 5
header_timeout_s = 2
body_timeout_s = 3
drain_timeout_s = 7
max_audio_requests = 9
audio_threads = 2
retry_after_s = 4
request_timeout_s = 30
grpc_listen = "0.0.0.0:9001"
grpc_max_message_mb = 16
allow_client_shm = true
client_shm_group = "corepool-clients"
[log]
level = "debug"
)"));
  Config expected;
  expected.listen = "[::1]:9000";
  expected.unix_socket = "/run/corepool/x.sock";
  expected.unix_socket_group = "corepool-clients";
  expected.max_body_mb = 8;
  expected.max_connections = 100;
  expected.idle_timeout_s = 5;
  expected.header_timeout_s = 2;
  expected.body_timeout_s = 3;
  expected.drain_timeout_s = 7;
  expected.max_audio_requests = 9;
  expected.audio_threads = 2;
  expected.retry_after_s = 4;
  expected.model_dir = "/srv/models/vad";
  expected.mode = "process";
  expected.workers = 6;
  expected.intra_op_threads = 2;
  expected.inter_op_threads = 3;
  expected.max_batch = 16;
  expected.optimize = "bf16";
  expected.queue_depth = 500;
  expected.pin_threads = false;
  expected.max_batch_delay_us = 2000;
  expected.hang_timeout_ms = 1500;
  expected.max_requests = 1000;
  expected.max_rss_mb = 2048;
  expected.request_timeout_s = 30;
  expected.grpc_listen = "0.0.0.0:9001";
  expected.grpc_max_message_mb = 16;
  expected.allow_client_shm = true;
  expected.client_shm_group = "corepool-clients";
  expected.out_dir = "/tmp/out";
  expected.force = true;
  expected.log_level = "debug";
  expect_same(config, expected);
}

TEST_F(ConfigTest, RecyclingKeysNeedProcessModeAndSayWhy) {
  Config config = load_config(write("[engine]\nmax_rss_mb = 900\n"));  // mode defaults to thread
  try {
    check_mode_keys(config);
    ADD_FAILURE() << "thread mode accepted engine.max_rss_mb";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "engine.max_rss_mb = 900 needs engine.mode = \"process\": thread mode has no worker "
                           "process to recycle (set it to 0, or use --mode process)");
  }
  config.mode = "process";
  EXPECT_NO_THROW(check_mode_keys(config));
  EXPECT_NO_THROW(check_mode_keys(Config{}));
  EXPECT_EQ(error_for("[engine]\nmax_requests = -1\n").find(path() + ":2: engine.max_requests:"), 0u);
}

TEST_F(ConfigTest, DottedKeysAtTheTopLevelWorkLikeSections) {
  const Config config = load_config(write("engine.workers = 3\nlog.level = \"warn\"\n"));
  EXPECT_EQ(config.workers, 3);
  EXPECT_EQ(config.log_level, "warn");
}

TEST_F(ConfigTest, WrongTypeNamesFileLineAndKey) {
  EXPECT_EQ(error_for("# comment\n\n[engine]\nmode = \"thread\"\n\n\nworkers = \"four\"\n"),
            path() + ":7: engine.workers: expected an integer, got a string");
}

TEST_F(ConfigTest, FloatForIntegerKeyIsAWrongType) {
  EXPECT_EQ(error_for("[engine]\nmax_batch = 2.5\n"),
            path() + ":2: engine.max_batch: expected an integer, got a float");
}

TEST_F(ConfigTest, StringForBooleanKeyIsAWrongType) {
  EXPECT_EQ(error_for("[batch]\nforce = \"yes\"\n"),
            path() + ":2: batch.force: expected a boolean (true or false), got a string");
}

TEST_F(ConfigTest, SectionGivenAsAValueIsAWrongType) {
  EXPECT_EQ(error_for("\nengine = 3\n"), path() + ":2: engine: expected a table, got an integer");
}

TEST_F(ConfigTest, OutOfRangeValueNamesFileLineKeyRangeAndValue) {
  EXPECT_EQ(error_for("[engine]\n\n\n\n\n\nworkers = -3\n"),
            path() + ":7: engine.workers: must be between 0 and 1024, got -3");
}

TEST_F(ConfigTest, EachIntegerKeyHasItsOwnRange) {
  EXPECT_EQ(error_for("[engine]\nintra_op_threads = -1\n"),
            path() + ":2: engine.intra_op_threads: must be between 0 and 1024, got -1");
  EXPECT_EQ(error_for("[engine]\ninter_op_threads = 1025\n"),
            path() + ":2: engine.inter_op_threads: must be between 0 and 1024, got 1025");
  EXPECT_EQ(error_for("[engine]\nmax_batch = -1\n"),
            path() + ":2: engine.max_batch: must be between 0 and 1024, got -1");
  EXPECT_EQ(error_for("[engine]\nqueue_depth = 1000001\n"),
            path() + ":2: engine.queue_depth: must be between 0 and 1000000, got 1000001");
}

TEST_F(ConfigTest, HugeIntegerIsReportedNotTruncatedIntoRange) {
  EXPECT_EQ(error_for("[engine]\nworkers = 4294967297\n"),
            path() + ":2: engine.workers: must be between 0 and 1024, got 4294967297");
}

TEST_F(ConfigTest, RangeEndsAreAccepted) {
  const Config config = load_config(write("[engine]\nworkers = 1024\nqueue_depth = 0\n"));
  EXPECT_EQ(config.workers, 1024);
  EXPECT_EQ(config.queue_depth, 0);
}

TEST_F(ConfigTest, AllocatorIsJemallocOrSystem) {
  EXPECT_EQ(load_config(write("[engine]\nallocator = \"system\"\n")).allocator, "system");
  EXPECT_EQ(Config{}.allocator, "jemalloc");
  EXPECT_EQ(error_for("[engine]\nallocator = \"tcmalloc\"\n"),
            path() + ":2: engine.allocator: must be one of \"jemalloc\", \"system\"; got \"tcmalloc\"");
}

TEST_F(ConfigTest, OptimizeIsOnednnByDefaultAndOneOfFour) {
  EXPECT_EQ(Config{}.optimize, "onednn");
  EXPECT_EQ(Config{}.max_batch, 0) << "measured at start by default";
  EXPECT_EQ(load_config(write("[engine]\noptimize = \"none\"\n")).optimize, "none");
  EXPECT_EQ(error_for("[engine]\noptimize = \"fp16\"\n"),
            path() + ":2: engine.optimize: must be one of \"none\", \"onednn\", \"onednn-direct\", \"bf16\"; got \"fp16\"");
}

TEST_F(ConfigTest, KernelsIsAutoByDefaultAndOneOfFivePaths) {
  EXPECT_EQ(Config{}.kernels, "auto");
  EXPECT_EQ(load_config(write("[engine]\nkernels = \"portable\"\n")).kernels, "portable");
  EXPECT_EQ(error_for("[engine]\nkernels = \"avx2\"\n"),
            path() + ":2: engine.kernels: must be one of \"auto\", \"onednn\", \"corepool\", \"portable\", "
                     "\"torch\"; got \"avx2\"");
}

TEST_F(ConfigTest, ModeOutsideItsChoicesIsRejected) {
  EXPECT_EQ(error_for("[engine]\nmode = \"threads\"\n"),
            path() + ":2: engine.mode: must be one of \"thread\", \"process\"; got \"threads\"");
}

TEST_F(ConfigTest, LogLevelOutsideItsChoicesIsRejected) {
  EXPECT_EQ(error_for("[log]\nlevel = \"verbose\"\n"),
            path() + ":2: log.level: must be one of \"trace\", \"debug\", \"info\", \"warn\", "
                     "\"error\", \"off\"; got \"verbose\"");
}

TEST_F(ConfigTest, EmptyDirectoryIsRejected) {
  EXPECT_EQ(error_for("[model]\ndir = \"\"\n"), path() + ":2: model.dir: must not be empty");
  EXPECT_EQ(error_for("[batch]\nout_dir = \"\"\n"),
            path() + ":2: batch.out_dir: must not be empty");
}

TEST_F(ConfigTest, UnknownKeyNamesFileLineAndKey) {
  EXPECT_EQ(error_for("[engine]\nworkers = 2\nwrokers = 3\n"),
            path() + ":3: engine.wrokers: unknown key");
}

TEST_F(ConfigTest, UnknownSectionIsReportedAtItsHeader) {
  EXPECT_EQ(error_for("[engine]\nworkers = 2\n\n[engin]\nworkers = 3\n"),
            path() + ":4: engin: unknown key");
}

TEST_F(ConfigTest, UnknownKeyInsideAKnownSectionsSubTableIsReported) {
  EXPECT_EQ(error_for("[engine]\nworkers = 2\n[engine.extra]\nx = 1\n"),
            path() + ":3: engine.extra: unknown key");
}

TEST_F(ConfigTest, FirstUnknownKeyInFileOrderIsReported) {
  // Tables iterate alphabetically; the report must follow the file instead.
  EXPECT_EQ(error_for("[log]\nzzz = 1\n[batch]\naaa = 2\n"), path() + ":2: log.zzz: unknown key");
}

TEST_F(ConfigTest, SyntaxErrorNamesFileLineAndColumn) {
  const std::string error = error_for("[engine]\nworkers = 2\nmode = = \"thread\"\n");
  EXPECT_EQ(error.rfind(path() + ":3:8: ", 0), 0u) << error;
  EXPECT_GT(error.size(), (path() + ":3:8: ").size()) << "no description: " << error;
}

TEST_F(ConfigTest, DuplicateKeyIsASyntaxError) {
  const std::string error = error_for("[engine]\nworkers = 2\nworkers = 3\n");
  EXPECT_EQ(error.rfind(path() + ":3:", 0), 0u) << error;
}

TEST_F(ConfigTest, MissingFileSaysCannotOpenWithTheReason) {
  const std::string missing = (dir_ / "nope.toml").string();
  try {
    load_config(missing);
    FAIL() << "no error for a missing file";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), missing + ": cannot open: No such file or directory");
  }
}

TEST_F(ConfigTest, DirectoryInsteadOfFileIsAnErrorNotAnEmptyConfig) {
  EXPECT_THROW(load_config(dir_.string()), ConfigError);
}

TEST_F(ConfigTest, ListenAddressesParseAsHostAndPort) {
  EXPECT_EQ(parse_host_port("127.0.0.1:8080", "x").host, "127.0.0.1");
  EXPECT_EQ(parse_host_port("127.0.0.1:8080", "x").port, 8080);
  EXPECT_EQ(parse_host_port("[::1]:0", "x").host, "::1");
  EXPECT_EQ(parse_host_port("[::1]:0", "x").port, 0);
  for (const char* bad : {"8080", ":80", "host:", "host:99999", "host:8o", "::1:80", "[::1]80", "[::1"}) {
    EXPECT_THROW(parse_host_port(bad, "serve.listen"), ConfigError) << bad;
  }
}

TEST_F(ConfigTest, ABadListenAddressNamesFileLineAndKey) {
  const std::string error = error_for("[serve]\nlisten = \"localhost\"\n");
  EXPECT_NE(error.find("corepool.toml:2: serve.listen"), std::string::npos) << error;
  EXPECT_NE(error.find("no port"), std::string::npos) << error;
}


// A repository load's parameters.config: the [engine] keys a reload may change.
std::string override_error(Config& config, const std::string& toml) {
  try {
    override_engine_keys(config, "parameters.config", toml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigOverrideTest, ReloadableEngineKeysAreSetWithTheFilesChecks) {
  Config c;
  c.mode = "process";
  EXPECT_EQ(override_error(c, "[engine]\nmax_batch = 2\nworkers = 3\noptimize = \"none\"\nmode = \"process\"\n"), "");
  EXPECT_EQ(c.max_batch, 2);
  EXPECT_EQ(c.workers, 3);
  EXPECT_EQ(c.optimize, "none");
  Config before = c;
  EXPECT_NE(override_error(c, "[engine]\nmax_batch = 5000\n").find("parameters.config:2: engine.max_batch"),
            std::string::npos);
  EXPECT_NE(override_error(c, "[engine]\nbogus = 1\n").find("engine.bogus: unknown key"), std::string::npos);
  EXPECT_NE(override_error(c, "[engine]\noptimize = \"fast\"\n").find("engine.optimize"), std::string::npos);
  EXPECT_NE(override_error(c, "[serve]\nlisten = \"x:1\"\n").find("unknown key"), std::string::npos);
  for (const char* fixed : {"mode = \"thread\"", "intra_op_threads = 4", "inter_op_threads = 4",
                            "allocator = \"system\""}) {
    Config d = before;
    EXPECT_NE(override_error(d, std::string("[engine]\n") + fixed + "\n").find("cannot change on reload"),
              std::string::npos) << fixed;
  }
  Config t;  // thread mode: no worker process to recycle
  EXPECT_NE(override_error(t, "[engine]\nmax_requests = 10\n").find("needs engine.mode"), std::string::npos);
}

}  // namespace
}  // namespace corepool
