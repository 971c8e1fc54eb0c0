// JSON form of a ShardReport and its place under the output directory.
// Uses ResultFile for the atomic write, so a killed shard leaves either its
// previous report or none, never half of one.
#include "supervisor/batch/shard_report.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "supervisor/batch/result_file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace corepool {
namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

ShardReport from_json(const json& j) {
  ShardReport r;
  r.index = j.at("shard").get<uint32_t>();
  r.count = j.at("count").get<uint32_t>();
  r.host = j.value("host", "");
  r.inputs = j.value("inputs", size_t{0});
  r.done = j.value("done", size_t{0});
  r.skipped = j.value("skipped", size_t{0});
  r.audio_seconds = j.value("audio_seconds", 0.0);
  r.wall_seconds = j.value("wall_seconds", 0.0);
  for (const json& f : j.value("failures", json::array())) {
    r.failures.push_back({f.at("input").get<std::string>(), f.at("error").get<std::string>()});
  }
  return r;
}

}  // namespace

void write_shard_report(const std::string& out_dir, const ShardReport& report) {
  json failures = json::array();
  for (const InputError& f : report.failures) failures.push_back({{"input", f.key}, {"error", f.message}});
  ResultFile file(out_dir + "/" + kShardReportDir + "/" + std::to_string(report.index) + "-of-" +
                  std::to_string(report.count) + ".json");
  file.write_line({{"shard", report.index},
                   {"count", report.count},
                   {"host", report.host.empty() ? host_name() : report.host},
                   {"inputs", report.inputs},
                   {"done", report.done},
                   {"skipped", report.skipped},
                   {"audio_seconds", report.audio_seconds},
                   {"wall_seconds", report.wall_seconds},
                   {"failures", failures}});
  file.commit();
}

std::vector<ShardReport> read_shard_reports(const std::string& out_dir, std::vector<std::string>& problems) {
  std::vector<ShardReport> reports;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(out_dir) / kShardReportDir, ec)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    try {
      reports.push_back(from_json(json::parse(text.str())));
    } catch (const std::exception& e) {
      problems.push_back(path.string() + ": not a shard report: " + e.what());
    }
  }
  return reports;
}

}  // namespace corepool
