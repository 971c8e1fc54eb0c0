// The formats `corepool batch --format` writes, as text: the name of each, the
// extension of its result file, its header and one event as one line. Pure
// functions over fixed events, so each format is checked byte for byte against
// a hand-written file (tests/unit/output_format_test.cc). The layouts follow
// what the field's tools read; docs/operations.md shows each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "audio/events.h"

namespace corepool {

enum class OutputFormat { kJsonl, kTimeline, kCsv, kAudacity, kRaven, kDcase };

// "jsonl" -> kJsonl ...; nullopt for an unknown name.
std::optional<OutputFormat> output_format_named(std::string_view name);
// "jsonl, timeline, csv, audacity, raven, dcase": for messages and --help.
const char* output_format_names();

// What a result file of this format ends with, after the input's own name
// ("demo.wav" -> "demo.wav.csv"): .jsonl, .csv, .txt (audacity),
// .selection.table.txt (raven), .tsv (dcase). Timeline has no files: "".
std::string result_extension(OutputFormat format);

// Only JSON Lines results end with a summary line (result_file.h's mark of a
// complete result); the other formats are complete when they exist, being
// renamed into place only once written in full.
bool has_summary_line(OutputFormat format);

// The header line with its '\n' (csv, raven, dcase), "" for the others.
std::string format_header(OutputFormat format);

// Where an event came from and what the row needs besides the event.
struct EventRow {
  std::string file;         // the input's result name (the "file" of jsonl)
  std::string path;         // raven's Begin Path: the input as named on the command line
  uint64_t selection = 1;   // raven: the row's number, from 1, unique in its table
  double high_freq_hz = 0;  // raven: the top of the band (the model's Nyquist frequency)
};

// One event as one line with its '\n', for csv, audacity, raven and dcase
// (jsonl and timeline lines are made by event_json() and timeline_line()).
std::string format_event(OutputFormat format, const Event& event, const EventRow& row);

// RFC 4180: the field as is, or in double quotes (inner quotes doubled) when it
// holds a comma, a double quote, CR or LF.
std::string csv_field(std::string_view field);

}  // namespace corepool
