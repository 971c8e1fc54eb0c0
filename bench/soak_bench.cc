// corepool-soak-bench: memory of `corepool serve` over hours of audio, jemalloc
// against glibc (issue 5). For each repeat, mode and allocator, in alternating
// order: start the server with that allocator (and MALLOC_CONF), POST varied
// ~60-s clips to /v1/audio:tag from a few keep-alive connections until the
// audio reaches --audio-hours, sample RSS/PSS of the supervisor and each worker
// meanwhile, then keep sampling through an idle window. Prints figures, writes
// CSVs and soak-memory.png; never passes or fails on them, but exits 1 when
// the server fails to start, answers anything but 200 with events, or dies.
// Usage (make bench-soak):
//   corepool-soak-bench --corepool build/supervisor/corepool --model models/default [--audio-hours 2]
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/soak_http.h"
#include "bench/soak_report.h"
#include "bench/soak_sampler.h"
#include "bench/soak_server.h"
#include "tools/audio_synth.h"

namespace {

using Clock = std::chrono::steady_clock;
using soak::RunResult;

struct Options {
  std::string corepool = "build/supervisor/corepool";
  std::string model = "models/default";
  std::vector<std::string> modes = {"thread", "process"};
  std::vector<std::string> allocators = {"jemalloc", "system"};
  std::vector<std::string> malloc_confs;  // jemalloc runs, one per value; none: corepool's default
  double audio_hours = 2.0;
  double clip_seconds = 60;
  int connections = 3;
  int workers = 0;
  int sample_ms = 250;
  int idle_seconds = 15;
  int repeats = 1;
  std::string out = "build/soak";
};

// One allocator setting under test.
struct Variant {
  std::string allocator;                   // "jemalloc" | "system"
  std::optional<std::string> malloc_conf;  // nullopt: MALLOC_CONF unset, corepool sets its default
};

struct Clip {
  std::string name;
  double seconds = 0;
  std::string body;  // the file's bytes
};

// A scratch directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "corepool-soak-XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<Variant> variants_of(const Options& o) {
  std::vector<Variant> out;
  for (const auto& allocator : o.allocators) {
    if (allocator != "jemalloc") {
      out.push_back({allocator, std::nullopt});
      continue;
    }
    if (o.malloc_confs.empty()) out.push_back({allocator, std::nullopt});
    for (const auto& conf : o.malloc_confs) {
      if (conf == "corepool") out.push_back({allocator, std::nullopt});
      else out.push_back({allocator, conf == "defaults" ? "" : conf});
    }
  }
  return out;
}

// The demo timeline's sections from the `first`-th on, cyclically, the last one
// cut so that the whole lasts exactly `seconds` (demo_of_seconds() would round
// to whole repeats of the 30-s demo).
std::vector<corepool::synth::Section> timeline_of(double seconds, size_t first) {
  const std::vector<corepool::synth::Section> demo = corepool::synth::demo_spec().sections;
  std::vector<corepool::synth::Section> out;
  for (double total = 0; total < seconds - 1e-9; ++first) {
    out.push_back(demo[first % demo.size()]);
    out.back().seconds = std::min(out.back().seconds, seconds - total);
    total += out.back().seconds;
  }
  return out;
}

// Eight clips of --clip-seconds ± 10 %, as real traffic varies: lengths, sample
// rates (so the server resamples), channels, containers and the order of the
// demo timeline's sections differ, so that every request's buffers differ in size.
std::vector<Clip> make_clips(const Options& o, const std::string& dir) {
  struct Kind { const char* format; int rate; int channels; };
  const Kind kinds[] = {{"wav", 16000, 1}, {"wav", 44100, 2}, {"flac", 16000, 1}, {"wav", 48000, 1},
                        {"wav", 22050, 2}, {"ogg", 44100, 1}, {"wavf", 16000, 1}, {"flac", 32000, 2}};
  std::vector<Clip> clips;
  for (size_t i = 0; i < std::size(kinds); ++i) {
    corepool::synth::FileSpec spec;
    spec.sections = timeline_of(o.clip_seconds * (0.9 + 0.2 * double(i) / (std::size(kinds) - 1)), i);
    spec.sample_rate = kinds[i].rate;
    spec.format = kinds[i].format;
    spec.channels = kinds[i].channels;
    spec.seed = i + 1;
    const std::string ext = spec.format == "wavf" ? "wav" : spec.format;
    const std::string path = fmt::format("{}/clip{}-{}hz-{}ch.{}", dir, i, kinds[i].rate, kinds[i].channels, ext);
    corepool::synth::write_audio(path, spec);
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    clips.push_back({std::filesystem::path(path).filename(), corepool::synth::duration_seconds(spec), bytes.str()});
  }
  return clips;
}

// The clips to send, in order, until their audio reaches `hours`: a fixed
// pseudo-random sequence, the same for every run.
std::vector<size_t> make_plan(const std::vector<Clip>& clips, double hours) {
  std::vector<size_t> plan;
  uint64_t x = 88172645463325252ull;
  for (double total = 0; total < hours * 3600;) {
    x ^= x << 13;  // xorshift64
    x ^= x >> 7;
    x ^= x << 17;
    plan.push_back(x % clips.size());
    total += clips[plan.back()].seconds;
  }
  return plan;
}

// The load: connections share one cursor into the plan; the first error stops them all.
class Load {
 public:
  Load(int port, const std::vector<Clip>& clips, const std::vector<size_t>& plan)
      : port_(port), clips_(clips), plan_(plan) {
    for (size_t i : plan) total_s_ += clips[i].seconds;
  }
  void run(int connections) {
    std::vector<std::thread> threads;
    for (int i = 0; i < connections; ++i) threads.emplace_back([this] { client(); });
    for (auto& t : threads) t.join();
  }
  double audio_done() const { return done_ms_.load() / 1000.0; }
  long requests() const { return requests_.load(); }
  const std::string& error() const { return error_; }

 private:
  void client();
  void check(const soak::HttpAnswer& answer, const Clip& clip) const;
  void progress(double before_s, double after_s);

  const int port_;
  const std::vector<Clip>& clips_;
  const std::vector<size_t>& plan_;
  double total_s_ = 0;
  std::atomic<size_t> next_{0};
  std::atomic<long> done_ms_{0}, requests_{0};
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  std::string error_;
  const Clock::time_point t0_ = Clock::now();
};

void Load::client() {
  try {
    soak::HttpClient http(port_, 300);
    for (size_t k = next_++; k < plan_.size() && !failed_; k = next_++) {
      const Clip& clip = clips_[plan_[k]];
      check(http.request("POST", "/v1/audio:tag", clip.body, "audio/" + clip.name.substr(clip.name.rfind('.') + 1)),
            clip);
      const long ms = std::lround(clip.seconds * 1000);
      const long before = done_ms_.fetch_add(ms);
      ++requests_;
      progress(before / 1000.0, (before + ms) / 1000.0);
    }
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = e.what();
    failed_ = true;
  }
}

void Load::check(const soak::HttpAnswer& answer, const Clip& clip) const {
  const std::string what = "POST /v1/audio:tag of " + clip.name;
  if (answer.status != 200) {
    throw std::runtime_error(fmt::format("{} answered {}: {}", what, answer.status, answer.body.substr(0, 300)));
  }
  const auto doc = nlohmann::json::parse(answer.body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("events") || !doc["events"].is_array() ||
      doc["events"].empty()) {
    throw std::runtime_error(what + " answered 200 without events: " + answer.body.substr(0, 300));
  }
  const double duration = doc.value("duration", -1.0);
  if (std::abs(duration - clip.seconds) > 1.0) {
    throw std::runtime_error(fmt::format("{}: the answer's duration is {} s, the clip lasts {:.2f} s", what,
                                         duration, clip.seconds));
  }
}

// One line on stderr at every tenth of the audio.
void Load::progress(double before_s, double after_s) {
  const int tenth = static_cast<int>(after_s * 10 / total_s_);
  if (tenth == static_cast<int>(before_s * 10 / total_s_)) return;
  const double wall = std::chrono::duration<double>(Clock::now() - t0_).count();
  std::fprintf(stderr, "  %3d %% of the audio (%.2f h) after %.0f s, %.1f x real time\n", tenth * 10,
               after_s / 3600, wall, after_s / wall);
}

// Every process of the tree runs on the allocator asked for (workers inherit it by fork).
void check_allocator(const soak::ServedCorepool& server, const Variant& v) {
  std::vector<pid_t> pids = {server.pid()};
  for (pid_t w : soak::children_of(server.pid())) pids.push_back(w);
  for (pid_t pid : pids) {
    if (soak::maps_file(pid, "libjemalloc") == (v.allocator == "jemalloc")) continue;
    throw std::runtime_error(fmt::format("pid {} ({}) does not run on {} (is libjemalloc2 installed?)", pid,
                                         pid == server.pid() ? "supervisor" : "worker", v.allocator));
  }
}

std::string conf_shown(const soak::ServedCorepool& server, const Variant& v) {
  if (v.allocator != "jemalloc") return "-";
  const auto conf = server.exec_environment("MALLOC_CONF");
  if (!conf || conf->empty()) return "(jemalloc defaults)";
  return *conf;
}

// Per-worker busy seconds and restarts, from the server's own /metrics.
void read_worker_counters(int port, RunResult& r) {
  soak::HttpClient http(port, 10);
  std::istringstream text(http.request("GET", "/metrics").body);
  r.min_worker_busy_s = -1;
  for (std::string line; std::getline(text, line);) {
    const double value = std::atof(line.c_str() + line.rfind(' ') + 1);
    if (line.rfind("corepool_worker_busy_seconds_total{", 0) == 0) {
      r.min_worker_busy_s = r.min_worker_busy_s < 0 ? value : std::min(r.min_worker_busy_s, value);
    }
    if (line.rfind("corepool_worker_restarts_total ", 0) == 0) r.restarts = value;
  }
}

void count_background_threads(const soak::ServedCorepool& server, RunResult& r) {
  r.bg_threads_supervisor = soak::threads_named(server.pid(), "jemalloc_bg_thd");
  const auto workers = soak::children_of(server.pid());
  r.workers = r.mode == "process" ? static_cast<int>(workers.size()) : 0;
  for (pid_t w : workers) r.bg_threads_workers += soak::threads_named(w, "jemalloc_bg_thd");
}

soak::ServeSpec spec_of(const Options& o, const std::string& mode, const Variant& v, const std::string& scratch,
                        int run) {
  soak::ServeSpec spec;
  spec.corepool = o.corepool;
  spec.model = o.model;
  spec.mode = mode;
  spec.allocator = v.allocator;
  spec.malloc_conf = v.malloc_conf;
  spec.workers = o.workers;
  spec.notify_socket = scratch + "/notify";
  spec.log = fmt::format("{}/serve-{}.log", o.out, run);
  return spec;
}

RunResult run_one(const Options& o, const std::string& mode, const Variant& v, const std::vector<Clip>& clips,
                  const std::vector<size_t>& plan, const std::string& scratch, int run) {
  RunResult r;
  r.mode = mode;
  r.allocator = v.allocator;
  soak::ServedCorepool server(spec_of(o, mode, v, scratch, run));
  r.ready_ms = server.ready_ms();
  r.conf = conf_shown(server, v);
  check_allocator(server, v);
  std::fprintf(stderr, "run %d: %s mode, %s, MALLOC_CONF %s: ready in %.0f ms (pid %d, port %d)\n", run,
               mode.c_str(), v.allocator == "system" ? "glibc" : "jemalloc", r.conf.c_str(), r.ready_ms,
               server.pid(), server.port());
  Load load(server.port(), clips, plan);
  soak::Sampler sampler(server.pid(), server.port(), std::chrono::milliseconds(o.sample_ms),
                        [&load] { return load.audio_done(); });
  const auto t0 = Clock::now();
  load.run(o.connections);
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!load.error().empty()) {
    const std::string exited = server.exited();
    throw std::runtime_error(load.error() + (exited.empty() ? "" : "\ncorepool serve " + exited) +
                             "\nlast lines of its log:\n" + server.log_tail(20));
  }
  r.audio_s = load.audio_done();
  r.requests = load.requests();
  count_background_threads(server, r);
  r.series = sampler.finish(std::chrono::seconds(o.idle_seconds));
  read_worker_counters(server.port(), r);
  if (const std::string how = server.stop(); !how.empty()) {
    throw std::runtime_error("corepool serve did not stop cleanly on SIGTERM: " + how + "; last lines of its log:\n" +
                             server.log_tail(20));
  }
  return r;
}

std::vector<RunResult> run_all(const Options& o) {
  TempDir scratch;
  const std::vector<Clip> clips = make_clips(o, scratch.path());
  const std::vector<size_t> plan = make_plan(clips, o.audio_hours);
  std::string list;
  for (const Clip& c : clips) list += fmt::format("  {} {:.1f} s {:.1f} MB\n", c.name, c.seconds, c.body.size() / 1e6);
  std::fprintf(stderr, "%zu requests per run, over these clips:\n%s", plan.size(), list.c_str());
  std::vector<RunResult> runs;
  for (int repeat = 0; repeat < o.repeats; ++repeat) {
    for (const auto& mode : o.modes) {
      for (const Variant& v : variants_of(o)) {
        runs.push_back(run_one(o, mode, v, clips, plan, scratch.path(), static_cast<int>(runs.size()) + 1));
        runs.back().repeat = repeat;
      }
    }
  }
  return runs;
}

// The previous run's series and logs would mix with this one's in the plot's directory.
void prepare_out_dir(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    if ((name.rfind("soak-", 0) == 0 && ext == ".csv") || (name.rfind("serve-", 0) == 0 && ext == ".log")) {
      std::filesystem::remove(entry.path());
    }
  }
}

void parse_options(CLI::App& app, Options& o) {
  app.add_option("--corepool", o.corepool, "the corepool binary");
  app.add_option("--model", o.model, "model directory");
  app.add_option("--modes", o.modes, "thread,process")->delimiter(',')->check(CLI::IsMember({"thread", "process"}));
  app.add_option("--allocators", o.allocators, "jemalloc,system")->delimiter(',')
      ->check(CLI::IsMember({"jemalloc", "system"}));
  app.add_option("--malloc-conf", o.malloc_confs,
                 "MALLOC_CONF of the jemalloc runs; repeat for one run per value. 'corepool': unset (corepool's "
                 "default), 'defaults': jemalloc's built-in defaults");
  app.add_option("--audio-hours", o.audio_hours, "audio per run, hours")->check(CLI::PositiveNumber);
  app.add_option("--clip-seconds", o.clip_seconds, "mean clip length (clips vary by +-10 %)")->check(CLI::Range(5, 600));
  app.add_option("--connections", o.connections, "concurrent client connections")->check(CLI::Range(1, 64));
  app.add_option("--workers", o.workers, "workers (0 = usable cpus)");
  app.add_option("--sample-ms", o.sample_ms, "sampling period")->check(CLI::Range(20, 10000));
  app.add_option("--idle-seconds", o.idle_seconds, "sampling after the load")->check(CLI::Range(0, 3600));
  app.add_option("--repeats", o.repeats, "rounds over modes and allocators")->check(CLI::Range(1, 100));
  app.add_option("--out", o.out, "directory for the CSVs, the plot and the server logs");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"corepool-soak-bench: memory of corepool serve over hours of audio, jemalloc vs glibc"};
  parse_options(app, o);
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  try {
    prepare_out_dir(o.out);
    const std::vector<RunResult> runs = run_all(o);
    fmt::print("# corepool-soak-bench: {:.2f} h of audio per run, ~{:.0f}-s clips, {} connections, "
               "{} workers (0: usable cpus), model {}\n", o.audio_hours, o.clip_seconds, o.connections, o.workers,
               o.model);
    soak::print_tables(runs);
    const std::vector<std::string> csv = soak::write_csv(o.out, runs);
    fmt::print("\nseries: {}/soak-*.csv; plot: {}\n", o.out, soak::plot(o.out, runs, csv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corepool-soak-bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
