// Reading the reference lists and batch's results for `corepool eval`; see
// event_lists.h. Every problem names the file and, where there is one, the line.
#include "supervisor/eval/event_lists.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <nlohmann/json.hpp>

namespace corepool {
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw EvalInputError(where + ": " + what);
}

// Tabs if the line has one (labels may hold spaces), else runs of spaces.
std::vector<std::string> columns(const std::string& line) {
  std::vector<std::string> out;
  const bool tabs = line.find('\t') != std::string::npos;
  size_t at = 0;
  while (at <= line.size()) {
    if (!tabs) at = line.find_first_not_of(' ', at);
    if (at == std::string::npos) break;
    const size_t end = std::min(line.find(tabs ? '\t' : ' ', at), line.size());
    out.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// Times beyond this are refused: the segment-based count keeps one flag per
// second and label, and no recording runs for 115 days.
constexpr double kMaxSeconds = 1e7;

bool in_range(double value) { return std::isfinite(value) && value >= 0 && value <= kMaxSeconds; }

bool seconds(const std::string& text, double& value) {
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' && in_range(value);
}

// The regular files below `dir` whose names end with one of `suffixes`, sorted;
// hidden directories and "*.tmp.<pid>" files left out.
std::vector<fs::path> list_files(const std::string& dir, const std::vector<std::string>& suffixes) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) bad(dir, "not a directory");
  std::vector<fs::path> files;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) bad(dir, ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) bad(dir, ec.message());
    const std::string name = it->path().filename().string();
    if (it->is_directory() && name.size() > 1 && name[0] == '.') {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || name.find(".tmp.") != std::string::npos) continue;
    for (const std::string& s : suffixes) {
      if (ends_with(name, s)) {
        files.push_back(it->path());
        break;
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  if (!in) bad(path.string(), "cannot read");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

FileEvents& entry(EventLists& lists, const std::string& key, const std::string& source) {
  FileEvents& f = lists[key];
  if (f.source.empty()) f.source = source;
  return f;
}

// One list file in the DCASE text format (see read_reference_dir()). `own_key`
// names the file of three-column rows.
void read_event_list(const fs::path& path, const std::string& own_key, EventLists& lists) {
  const std::vector<std::string> lines = lines_of(path);
  bool content_seen = false;
  size_t registered = 0;  // entries made from this file
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string where = path.string() + ":" + std::to_string(n + 1);
    const std::vector<std::string> cols = columns(lines[n]);
    if (cols.empty() || (cols.size() == 1 && cols[0].empty())) continue;
    const bool first = !content_seen;
    content_seen = true;
    if (cols.size() == 1 && cols[0].find(',') != std::string::npos) {
      bad(where, "one column holding commas: the columns of an event list are tab-separated");
    }
    if (cols.size() == 1) {  // a file without events
      entry(lists, file_key(cols[0]), path.string());
      ++registered;
      continue;
    }
    if (cols.size() != 3 && cols.size() != 4) {
      bad(where, "expected [filename] onset offset label, found " + std::to_string(cols.size()) + " columns");
    }
    const size_t at = cols.size() - 3;
    AnnotatedEvent e;
    if (!seconds(cols[at], e.onset) || !seconds(cols[at + 1], e.offset)) {
      if (first) continue;  // a header
      bad(where, "onset '" + cols[at] + "' or offset '" + cols[at + 1] + "' is not a time in seconds (0 to 1e7)");
    }
    if (e.offset < e.onset) bad(where, "offset " + cols[at + 1] + " is before onset " + cols[at]);
    e.label = cols[at + 2];
    if (e.label.empty()) bad(where, "the event has no label");
    entry(lists, at == 1 ? file_key(cols[0]) : own_key, path.string()).events.push_back(e);
    ++registered;
  }
  if (registered == 0) entry(lists, own_key, path.string());  // no events: the list's own file has none
}

std::string without(const std::string& name, const std::string& suffix) {
  return ends_with(name, suffix) ? name.substr(0, name.size() - suffix.size()) : name;
}

// A batch JSON Lines result: event lines, then the summary line.
void read_jsonl_result(const fs::path& path, EventLists& lists) {
  const std::vector<std::string> lines = lines_of(path);
  std::string key = file_key(without(path.filename().string(), ".jsonl"));
  std::vector<AnnotatedEvent> events;
  bool summary = false;
  for (size_t n = 0; n < lines.size(); ++n) {
    if (lines[n].find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(n + 1);
    const auto line = nlohmann::json::parse(lines[n], nullptr, /*allow_exceptions=*/false);
    if (!line.is_object()) bad(where, "not a JSON object");
    if (line.contains("file") && line["file"].is_string()) key = file_key(line["file"].get<std::string>());
    if (line.contains("summary")) {
      summary = true;
      continue;
    }
    AnnotatedEvent e;
    if (!line.contains("start") || !line["start"].is_number() || !line.contains("end") || !line["end"].is_number() ||
        !line.contains("label") || !line["label"].is_string()) {
      bad(where, "an event line needs a numeric start and end and a label");
    }
    e.onset = line["start"].get<double>();
    e.offset = line["end"].get<double>();
    e.label = line["label"].get<std::string>();
    if (!in_range(e.onset) || !in_range(e.offset) || e.offset < e.onset) {
      bad(where, "an event needs 0 <= start <= end <= 1e7 seconds");
    }
    events.push_back(std::move(e));
  }
  if (!summary) bad(path.string(), "no summary line: the result is not complete (rerun corepool batch)");
  if (lists.count(key)) bad(path.string(), "a second result for '" + key + "' (the first: " + lists[key].source + ")");
  FileEvents& f = entry(lists, key, path.string());
  f.events = std::move(events);
}

// A --format dcase result: the same text as a reference list, its own name minus ".tsv".
void read_tsv_result(const fs::path& path, EventLists& lists) {
  EventLists one;
  read_event_list(path, file_key(without(path.filename().string(), ".tsv")), one);
  for (auto& [key, f] : one) {
    if (lists.count(key)) bad(path.string(), "a second result for '" + key + "' (the first: " + lists[key].source + ")");
    lists[key] = std::move(f);
  }
}

}  // namespace

std::string file_key(const std::string& name) {
  std::string base = fs::path(name).filename().string();
  const size_t dot = base.rfind('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

EventLists read_reference_dir(const std::string& dir) {
  EventLists lists;
  for (const fs::path& path : list_files(dir, {".txt", ".tsv", ".ann"})) {
    read_event_list(path, file_key(path.stem().string()), lists);
  }
  return lists;
}

EventLists read_results_dir(const std::string& dir) {
  EventLists lists;
  for (const fs::path& path : list_files(dir, {".jsonl", ".tsv"})) {
    if (ends_with(path.string(), ".jsonl")) {
      read_jsonl_result(path, lists);
    } else {
      read_tsv_result(path, lists);
    }
  }
  return lists;
}

}  // namespace corepool
