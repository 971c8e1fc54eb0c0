// Keys are hashes of content, not of names or times: a model replaced in
// place under the same path, or a copy of the same model elsewhere, is told
// apart (or found) by what it is. The binary is the exception, keyed by size
// and modification time: a rebuilt corepool may measure its kernels
// differently, and hashing a 10 MB program on every start buys nothing more.
#include "worker/plan_cache.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace corepool {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// 64-bit multiply-xorshift over 8-byte words: about 4 GB/s, so an 18.7 MB
// CNN10 costs ~5 ms a start. Not cryptographic: a cache key, and the file
// holds the whole key text, compared on read.
uint64_t hash_bytes(const std::string& bytes) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ bytes.size();
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  for (; i < bytes.size(); ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
  h ^= h >> 29;
  return h * 0xc4ceb9fe1a85ec53ull;
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read it for the plan cache's key");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first processor's identity and flags: a plan measured on one CPU model
// (or one whose hypervisor hides AVX-512) is not another's.
std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(in, line) && !line.empty()) {
    for (const char* field : {"vendor_id", "cpu family", "model", "model name", "stepping", "flags"}) {
      const std::string f = field;
      if (line.compare(0, f.size(), f) == 0 && line.find(':') != std::string::npos &&
          line.find_first_not_of(" \t", f.size()) == line.find(':')) {
        // Flags are long: their hash keeps the key text readable.
        out += f == "flags" ? fmt::format("flags {:016x}; ", hash_bytes(line)) : line.substr(line.find(':') + 2) + "; ";
      }
    }
  }
  return out;
}

std::string binary_identity() {
  struct stat st {};
  if (::stat("/proc/self/exe", &st) != 0) return "unknown";
  return fmt::format("{} bytes, mtime {}.{:09d}", st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json costs_json(const std::vector<BatchCost>& costs) {
  json a = json::array();
  for (const auto& c : costs) a.push_back({{"batch", c.batch}, {"ms_per_item", c.ms_per_item}, {"spread", c.spread}});
  return a;
}

}  // namespace

std::string PlanKey::file_name() const { return fmt::format("plan-{:016x}.json", hash_bytes(text)); }

PlanKey plan_key(const PlanKeyInputs& in) {
  const fs::path dir(in.model_dir);
  // Read in this order, so that a missing model names model.pt first.
  const uint64_t pt = hash_bytes(read_whole((dir / "model.pt").string()));
  const uint64_t toml = hash_bytes(read_whole((dir / "model.toml").string()));
  PlanKey key;
  key.text = fmt::format(
      "model.pt {:016x}\nmodel.toml {:016x}\ncpu {}\ncorepool {}\n{}\noptimize {}, kernels {}, {}, batch limit {}, "
      "max_batch {}, engines {}\n",
      pt, toml, cpu_identity(), binary_identity(), in.libraries, in.optimize, in.kernels,
      in.shared ? "shared weights" : "private weights", in.limit, in.max_batch, in.engines);
  return key;
}

std::string default_plan_cache_dir() {
  if (const char* d = std::getenv("CACHE_DIRECTORY"); d && *d) {
    const std::string first(d, std::strcspn(d, ":"));  // systemd may list several
    return first;
  }
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/corepool";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/corepool";
  return "";
}

std::optional<CachedPlan> read_plan(const std::string& dir, const PlanKey& key, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<CachedPlan> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const std::string path = (fs::path(dir) / key.file_name()).string();
  std::ifstream in(path);
  if (!in) return fail("no cached plan (" + path + ")");
  try {
    const json j = json::parse(in);
    if (j.at("key").get<std::string>() != key.text) return fail(path + " is for another key");
    CachedPlan p;
    p.winograd_chunks = j.at("winograd_chunks").get<std::vector<int64_t>>();
    p.planned_at = j.at("planned_at").get<std::string>();
    const json& c = j.at("calibration");
    p.measured_batch = !c.is_null();
    if (p.measured_batch) {
      p.calibration.best = c.at("best").get<int>();
      p.calibration.rounds = c.at("rounds").get<int>();
      p.calibration.settled = c.at("settled").get<bool>();
      p.calibration.seconds = c.at("seconds").get<double>();
      p.calibration.engines = c.value("engines", 1);
      for (const json& b : c.at("costs")) {
        p.calibration.costs.push_back(
            {b.at("batch").get<int>(), b.at("ms_per_item").get<double>(), b.at("spread").get<double>()});
      }
      if (p.calibration.best < 1) return fail(path + ": batch " + std::to_string(p.calibration.best));
    }
    return p;
  } catch (const std::exception& e) {
    return fail(path + " is malformed (" + e.what() + ")");
  }
}

std::string write_plan(const std::string& dir, const PlanKey& key, const CachedPlan& plan) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return dir + ": " + ec.message();
  json j = {{"key", key.text}, {"planned_at", plan.planned_at.empty() ? utc_now() : plan.planned_at},
            {"winograd_chunks", plan.winograd_chunks}, {"calibration", nullptr}};
  if (plan.measured_batch) {
    const Calibration& c = plan.calibration;
    j["calibration"] = {{"best", c.best},       {"rounds", c.rounds},   {"settled", c.settled},
                        {"engines", c.engines}, {"seconds", c.seconds}, {"costs", costs_json(c.costs)}};
  }
  const fs::path final_path = fs::path(dir) / key.file_name();
  // The pid in the temporary name: two starts planning at once each write
  // their own, and either rename leaves a whole file.
  const fs::path tmp = fs::path(dir) / fmt::format(".{}.{}.tmp", key.file_name(), ::getpid());
  {
    std::ofstream out(tmp);
    out << j.dump(2) << '\n';
    if (!out.flush()) return tmp.string() + ": cannot write";
  }
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return final_path.string() + ": " + ec.message();
  }
  return "";
}

}  // namespace corepool
