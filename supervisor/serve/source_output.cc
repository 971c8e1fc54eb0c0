// SourceOutput: see source_output.h. Called by the session under its own
// lock, from its thread and executor threads; takes SourceShared::mu for
// each line, never blocks (a sink's write is a buffered local line or a
// bounded queue's push).
#include "supervisor/serve/source_output.h"

#include <cmath>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

namespace corepool {

using Wall = std::chrono::system_clock;
using ojson = nlohmann::ordered_json;

void SourceShared::write(const std::string& line) {
  const std::time_t now = Wall::to_time_t(Wall::now());
  for (auto& sink : sinks) sink->write(line, now);
}

namespace {

std::string utc_text(Wall::time_point t) {
  const std::time_t secs = Wall::to_time_t(t);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  char full[48];
  std::snprintf(full, sizeof full, "%s.%03dZ", text, int(ms));
  return full;
}

double rounded_ms(double seconds) { return std::round(seconds * 1000) / 1000; }

// The session's output: each event as a line of every sink, the summary as
// the connection's last line.
class SourceOutput final : public StreamOutput {
 public:
  // `offset_s`: where this stream starts in its connection's audio.
  // `live`: the audio arrives as it is heard, so "time" (the wall clock at
  // the connection's start plus "start") says when; a file has none.
  SourceOutput(std::shared_ptr<SourceShared> shared, std::shared_ptr<LegEnd> leg, uint64_t connection,
               double offset_s, bool live)
      : shared_(std::move(shared)),
        leg_(std::move(leg)),
        connection_(connection),
        offset_s_(offset_s),
        live_(live),
        wall0_(Wall::now() - std::chrono::microseconds(int64_t(offset_s * 1e6))) {}

  bool event(std::string text) override {
    const nlohmann::json e = nlohmann::json::parse(text, nullptr, false);
    if (e.is_discarded()) return false;
    ojson line = {{"source", shared_->name}, {"connection", connection_}};
    const double start = e.value("start", 0.0) + offset_s_;
    line["start"] = rounded_ms(start);
    line["end"] = rounded_ms(e.value("end", 0.0) + offset_s_);
    line["label"] = e.value("label", "");
    line["score"] = e.value("score", 0.0);
    if (live_) line["time"] = utc_text(wall0_ + std::chrono::milliseconds(int64_t(start * 1000)));
    std::string out = line.dump();
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->write(out);
    if (shared_->hub) shared_->hub->publish("event", out);
    shared_->status.last_event = std::move(out);
    ++shared_->status.events;
    return true;
  }

  void close(StreamEnd how, const std::string& reason, std::string summary) override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (!summary.empty()) {
      ojson line = {{"source", shared_->name}, {"connection", connection_}};
      line["summary"] = ojson::parse(summary, nullptr, false);
      line["time"] = utc_text(Wall::now());
      shared_->write(line.dump());
      if (shared_->hub) shared_->hub->publish("end", line.dump());
    }
    leg_->closed = true;
    leg_->how = how;
    leg_->reason = reason;
    shared_->cv.notify_all();
  }

 private:
  std::shared_ptr<SourceShared> shared_;
  std::shared_ptr<LegEnd> leg_;
  const uint64_t connection_;
  const double offset_s_;
  const bool live_;
  const Wall::time_point wall0_;
};

}  // namespace

std::unique_ptr<StreamOutput> make_source_output(std::shared_ptr<SourceShared> shared, std::shared_ptr<LegEnd> end,
                                                 uint64_t connection, double offset_s, bool live) {
  return std::make_unique<SourceOutput>(std::move(shared), std::move(end), connection, offset_s, live);
}

}  // namespace corepool
