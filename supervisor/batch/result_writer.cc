// One input's output; see result_writer.h. JSON Lines and timeline lines are
// made exactly as before --format had more choices (event_json() with the
// file added, timeline_line()), so their bytes have not changed.
#include "supervisor/batch/result_writer.h"

#include <cstdio>
#include <utility>

#include "audio/event_json.h"
#include "supervisor/batch/timeline.h"

namespace corepool {

ResultWriter::ResultWriter(OutputSpec& spec, std::string file, std::string path, std::unique_ptr<ResultFile> out)
    : spec_(spec), out_(std::move(out)) {
  row_.file = std::move(file);
  row_.path = std::move(path);
  row_.high_freq_hz = spec.high_freq_hz;
  if (out_) {
    const std::string header = format_header(spec_.format);
    if (!header.empty()) out_->write_text(header);
  }
}

void ResultWriter::event(const Event& e) {
  if (spec_.format == OutputFormat::kJsonl || spec_.format == OutputFormat::kTimeline) {
    write(event_json(e));
    return;
  }
  row_.selection = out_ ? ++selections_ : ++spec_.stdout_selections;
  write_text(format_event(spec_.format, e, row_));
}

void ResultWriter::summary(nlohmann::json summary) {
  if (has_summary_line(spec_.format)) write({{"summary", std::move(summary)}});
}

void ResultWriter::commit(CommitGroup& group, CommitGroup::Done done) {
  if (out_) {
    group.add(*out_, std::move(done));
  } else {
    done("");
  }
}

void ResultWriter::abandon() {
  if (out_) out_->abandon();
}

void ResultWriter::write(nlohmann::json line) {
  line["file"] = row_.file;
  if (out_) {
    out_->write_line(line);
    return;
  }
  const std::string text = spec_.format == OutputFormat::kTimeline ? timeline_line(line) : line.dump();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);  // line-buffered, also on a pipe: a reader sees each event as it closes
}

void ResultWriter::write_text(const std::string& text) {
  if (out_) {
    out_->write_text(text);
    return;
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

void print_stdout_header(OutputFormat format) {
  const std::string header = format_header(format);
  if (header.empty()) return;
  std::fputs(header.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace corepool
