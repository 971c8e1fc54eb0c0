// The text of each output format; see output_format.h. Times are written with
// millisecond digits (events are multiples of the hop, or clipped to the
// file's duration, which jsonl also rounds to 1 ms), Audacity's with the six
// digits it writes itself; scores with four, as in jsonl. The tab-separated
// formats cannot carry a tab or a line break inside a field: those become spaces.
#include "supervisor/batch/output_format.h"

#include <array>
#include <cstdio>
#include <utility>

namespace corepool {
namespace {

constexpr std::array<std::pair<std::string_view, OutputFormat>, 6> kNames = {{
    {"jsonl", OutputFormat::kJsonl},
    {"timeline", OutputFormat::kTimeline},
    {"csv", OutputFormat::kCsv},
    {"audacity", OutputFormat::kAudacity},
    {"raven", OutputFormat::kRaven},
    {"dcase", OutputFormat::kDcase},
}};

std::string tsv_field(std::string_view field) {
  std::string out(field);
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

std::string printed(const char* pattern, double a, double b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, a, b);
  return buf;
}

}  // namespace

std::optional<OutputFormat> output_format_named(std::string_view name) {
  for (const auto& [n, format] : kNames) {
    if (n == name) return format;
  }
  return std::nullopt;
}

const char* output_format_names() { return "jsonl, timeline, csv, audacity, raven, dcase"; }

std::string result_extension(OutputFormat format) {
  switch (format) {
    case OutputFormat::kJsonl: return ".jsonl";
    case OutputFormat::kTimeline: return "";
    case OutputFormat::kCsv: return ".csv";
    case OutputFormat::kAudacity: return ".txt";
    case OutputFormat::kRaven: return ".selection.table.txt";
    case OutputFormat::kDcase: return ".tsv";
  }
  return "";
}

bool has_summary_line(OutputFormat format) {
  return format == OutputFormat::kJsonl || format == OutputFormat::kTimeline;
}

std::string format_header(OutputFormat format) {
  switch (format) {
    case OutputFormat::kCsv: return "File,Start (s),End (s),Label,Score\n";
    case OutputFormat::kRaven:
      return "Selection\tView\tChannel\tBegin Time (s)\tEnd Time (s)\tLow Freq (Hz)\tHigh Freq (Hz)\t"
             "Label\tScore\tBegin Path\tFile Offset (s)\n";
    case OutputFormat::kDcase: return "filename\tonset\toffset\tevent_label\n";
    default: return "";
  }
}

std::string csv_field(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string format_event(OutputFormat format, const Event& e, const EventRow& row) {
  char score[32];
  std::snprintf(score, sizeof score, "%.4f", static_cast<double>(e.score));
  const std::string times = printed("%.3f\t%.3f", e.start, e.end);
  switch (format) {
    case OutputFormat::kCsv:
      return csv_field(row.file) + printed(",%.3f,%.3f,", e.start, e.end) + csv_field(e.label) + "," + score + "\n";
    case OutputFormat::kAudacity:
      return printed("%.6f\t%.6f\t", e.start, e.end) + tsv_field(e.label) + "\n";
    case OutputFormat::kRaven: {
      char band[48];
      std::snprintf(band, sizeof band, "\t0\t%.0f\t", row.high_freq_hz);
      char offset[32];
      std::snprintf(offset, sizeof offset, "%.3f", e.start);
      return std::to_string(row.selection) + "\tSpectrogram 1\t1\t" + times + band + tsv_field(e.label) + "\t" +
             score + "\t" + tsv_field(row.path) + "\t" + offset + "\n";
    }
    case OutputFormat::kDcase:
      return tsv_field(row.file) + "\t" + times + "\t" + tsv_field(e.label) + "\n";
    default:
      return "";
  }
}

}  // namespace corepool
