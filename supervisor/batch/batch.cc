// The batch driver. The calling thread reads and segments one file after the
// other and submits segments (blocking when the executor's queue is full);
// results come back on engine threads through on_complete(), which folds them
// into the file's EventBuilder under one mutex. When a file's last segment is
// in, the file leaves the table and its commit (the last events, the summary,
// fsync, rename) runs on a SerialWorker of its own, off the engine threads and
// outside the mutex. Files overlap, so no core idles at a file boundary.
// The run's first segments (half the executor's queue, across files if they
// are short) are gathered and queued at once: submitted one by one, each would
// wake an idle engine that runs it alone, a cold batch of one, while the
// reader decodes the next.
// Standard input ("-") goes last, after the files, read in small blocks and
// submitted without an opening group: a live source must not wait for audio
// that has not been spoken yet. With --out - every line is flushed as it is
// written, so each event reaches a pipe reader when it closes.
// A stateful model's files go to stateful_batch.cc instead (streams of chunks
// that carry their state). A sharded run takes its 1/N of the inputs first (shard.h) and leaves a
// shard report for `corepool merge` (shard_report.h).
#include "supervisor/batch/batch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>

#include <nlohmann/json.hpp>

#include "audio/event_json.h"
#include "supervisor/batch/commit_input.h"
#include "supervisor/batch/event_filter.h"
#include "supervisor/batch/inputs.h"
#include "supervisor/batch/manifest.h"
#include "supervisor/batch/progress.h"
#include "supervisor/batch/result_file.h"
#include "supervisor/batch/result_path.h"
#include "supervisor/batch/result_writer.h"
#include "supervisor/batch/run_inputs.h"
#include "supervisor/batch/serial_worker.h"
#include "supervisor/batch/shard_report.h"
#include "supervisor/batch/stateful_batch.h"
#include "supervisor/batch/tally.h"
#include "audio/audio_stream.h"
#include "audio/events.h"
#include "audio/segmenter.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct FileJob {
  BatchInput input;
  std::unique_ptr<ResultWriter> out;
  std::unique_ptr<EventBuilder> events;
  std::unique_ptr<EventFilter> filter;  // between events and out
  uint64_t submitted = 0;
  uint64_t completed = 0;
  uint64_t total_segments = 0;
  double duration = 0;
  size_t event_count = 0;
  bool reading_done = false;
  std::string error;  // non-empty: the file failed
  json skipped;       // non-null: stretches decoded as silence (skipped_json)
  Clock::time_point started = Clock::now();
};

class BatchRun {
 public:
  BatchRun(const BatchOptions& options, const ModelConfig& model, Progress& progress)
      : options_(options), model_(model), progress_(progress) {
    output_.format = options.format;
    output_.high_freq_hz = model.sample_rate / 2.0;
  }

  void process(const BatchInput& input, Executor& executor);
  // Queues the opening group (see above) if it is not full yet: at the end
  // of the inputs, before waiting for the executor.
  void flush_opening(Executor& executor);
  void on_complete(SegmentResult&& r);
  void fail_input(const std::string& key, const std::string& message);
  // Waits for the commits of every finished file (call after the executor is
  // idle); the stats are complete after it.
  void drain() { committer_.drain(); }
  BatchStats& stats() { return stats_; }

 private:
  uint64_t open_job(const BatchInput& input, const std::string& out_path);  // "" = stdout
  std::unique_ptr<AudioStream> open_stream(const BatchInput& input) const;  // validates; throws AudioError
  void submit(uint64_t id, Segment& segment, Executor& executor);
  void end_reading(uint64_t id, uint64_t total, double duration, const std::string& error, json skipped);
  void maybe_finish(uint64_t id);  // requires mu_
  void commit(std::shared_ptr<FileJob> job);  // on committer_, without mu_
  void finish_ok(FileJob& job);               // on committer_, without mu_
  void settle(FileJob& job);                  // counts a committed or failed job

  const BatchOptions& options_;
  const ModelConfig& model_;
  Progress& progress_;
  OutputSpec output_;
  std::mutex mu_;
  // Owned through a pointer: a job's EventBuilder holds its address, and a
  // finished job moves out of the table to be committed.
  std::map<uint64_t, std::unique_ptr<FileJob>> jobs_;
  uint64_t next_id_ = 0;
  // The reader's own (no lock): the opening group and whether it has gone.
  std::vector<SegmentTask> opening_;
  size_t opening_size_ = 1;
  bool opened_ = false;
  BatchStats stats_;
  CommitGroup commits_;     // results written, not yet in place: the committer's own
  SerialWorker committer_;  // last: its thread stops before the members it uses go
};

uint64_t BatchRun::open_job(const BatchInput& input, const std::string& out_path) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  FileJob& job = *(jobs_[id] = std::make_unique<FileJob>());
  job.input = input;
  job.out = std::make_unique<ResultWriter>(output_, input.relative, input.path,
                                           out_path.empty() ? nullptr : std::make_unique<ResultFile>(out_path));
  job.filter = std::make_unique<EventFilter>(options_.filter, [&job](const Event& e) {
    ++job.event_count;
    job.out->event(e);
  });
  job.events = std::make_unique<EventBuilder>(model_.labels, model_.thresholds, model_.segment_seconds,
                                              model_.hop_seconds, [&job](const Event& e) { job.filter->add(e); },
                                              model_.quiet_index());
  return id;
}

void BatchRun::submit(uint64_t id, Segment& segment, Executor& executor) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++jobs_.at(id)->submitted;
  }
  SegmentTask task{id, segment.index, std::move(segment.samples)};
  if (opened_) {
    executor.submit(std::move(task));
    return;
  }
  if (opening_.empty()) opening_size_ = std::max<size_t>(1, executor.stats().depth / 2);
  opening_.push_back(std::move(task));
  if (opening_.size() >= opening_size_) flush_opening(executor);
}

void BatchRun::flush_opening(Executor& executor) {
  if (opened_) return;
  opened_ = true;
  // Half the queue of an idle executor always fits; should it not, one by
  // one (blocking) loses nothing.
  if (opening_.empty() || executor.try_submit(opening_)) return;
  for (auto& task : opening_) executor.submit(std::move(task));
  opening_.clear();
}

void BatchRun::process(const BatchInput& input, Executor& executor) {
  uint64_t id = 0;
  try {
    // Validates before any output exists.
    std::unique_ptr<AudioStream> opened = open_stream(input);
    AudioStream& stream = *opened;
    if (input.pipe) flush_opening(executor);  // from here on every segment goes at once
    // Checked again here, just before the file is created: the tree may have changed.
    id = open_job(input, options_.out_dir == "-" ? ""
                                                : result_path(options_.out_dir, input.relative,
                                                              result_extension(options_.format)));
    Segmenter segmenter(model_.segment_samples(), model_.hop_samples());
    std::vector<float> block;
    Segment segment;
    std::string error;
    try {
      while (stream.read(block)) {
        segmenter.push(block.data(), block.size());
        block.clear();
        while (segmenter.next(segment)) submit(id, segment, executor);
      }
      while (segmenter.finish(segment)) submit(id, segment, executor);
    } catch (const std::exception& e) {
      error = e.what();
    }
    json skipped;
    if (!stream.skipped().empty()) {
      skipped = skipped_json(stream.skipped());
      progress_.print_line("warning: " + input.path + ": " + skipped_text(stream.skipped()));
    }
    end_reading(id, segmenter.segments_emitted(),
                static_cast<double>(segmenter.samples_pushed()) / model_.sample_rate, error, std::move(skipped));
  } catch (const std::exception& e) {  // validation or result-file creation failed
    fail_input(input.relative, e.what());
  }
}

// A pipe is read in blocks of kPipeBlockFrames: 0.25 s at 16 kHz, so a live
// source is segmented as it arrives rather than two seconds at a time.
std::unique_ptr<AudioStream> BatchRun::open_stream(const BatchInput& input) const {
  constexpr size_t kFileBlockFrames = 32768, kPipeBlockFrames = 4096;
  if (!input.pipe) {
    return std::make_unique<AudioStream>(input.path, model_.sample_rate, kFileBlockFrames, options_.audio_stream);
  }
  return std::make_unique<AudioStream>(AudioSource::standard_input(kStdinName, options_.raw), model_.sample_rate,
                                       kPipeBlockFrames, options_.audio_stream);
}

void BatchRun::end_reading(uint64_t id, uint64_t total, double duration, const std::string& error,
                           json skipped) {
  std::lock_guard<std::mutex> lock(mu_);
  FileJob& job = *jobs_.at(id);
  job.reading_done = true;
  job.skipped = std::move(skipped);
  job.total_segments = total;
  job.duration = duration;
  if (job.error.empty()) job.error = error;
  maybe_finish(id);
}

void BatchRun::on_complete(SegmentResult&& r) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(r.stream);
  if (it == jobs_.end()) return;  // late duplicate of a finished file
  FileJob& job = *it->second;
  ++job.completed;
  // Progress counts audio as inferred, not as decoded (decoding runs ahead by
  // the queue's depth): each segment advances the file by one hop.
  progress_.add_segments(1);
  progress_.add_audio_seconds(model_.hop_seconds);
  if (job.error.empty() && !r.error.empty()) {
    job.error = job.input.path + ": segment " + std::to_string(r.index) + ": " + r.error;
  }
  if (job.error.empty()) {
    try {
      job.events->add(r.index, r.scores);
    } catch (const std::exception& e) {
      job.error = job.input.path + ": " + e.what();
    }
  }
  maybe_finish(r.stream);
}

void BatchRun::maybe_finish(uint64_t id) {
  auto it = jobs_.find(id);
  const FileJob& job = *it->second;
  if (!job.reading_done || job.completed < job.submitted) return;
  // std::function wants a copyable callable: the job rides in a shared_ptr.
  std::shared_ptr<FileJob> done = std::move(it->second);
  jobs_.erase(it);
  committer_.post([this, done] { commit(done); });
}

// No other thread touches a finished job: its segments are all in, and a late
// duplicate result finds no entry in jobs_. Its result file joins the group,
// which the last commit queued (or a full group) puts in place.
void BatchRun::commit(std::shared_ptr<FileJob> job) {
  commit_input(
      job, commits_, [this](FileJob& j) { finish_ok(j); }, [this](FileJob& j) { settle(j); },
      [this] { return committer_.queued(); });
}

void BatchRun::settle(FileJob& job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (job.error.empty()) {
    tally_done(stats_, progress_, job.total_segments, job.duration);
  } else {
    tally_failed(stats_, progress_, job.input.relative, job.error);
  }
}

void BatchRun::finish_ok(FileJob& job) {
  job.events->finish(job.total_segments, job.duration);
  job.filter->finish();
  const double wall = std::chrono::duration<double>(Clock::now() - job.started).count();
  json summary = {{"duration", rounded(job.duration, 1e3)},
                  {"segments", job.total_segments},
                  {"events", job.event_count},
                  {"wall_seconds", rounded(wall, 1e3)},
                  {"x_realtime", rounded(wall > 0 ? job.duration / wall : 0.0, 1e1)}};
  if (!job.skipped.is_null()) summary["skipped"] = job.skipped;
  job.out->summary(std::move(summary));
}

void BatchRun::fail_input(const std::string& key, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  tally_failed(stats_, progress_, key, message);
}

// Temp files of results (and the report) of this shard; other shards may be
// writing theirs into the same directory from other hosts right now.
std::function<bool(const std::string&)> owned_temp_files(const ShardSpec& shard, const std::string& suffix) {
  if (!shard.sharded()) return {};
  const std::string report = std::string(kShardReportDir) + "/" + std::to_string(shard.index) + "-of-" +
                             std::to_string(shard.count) + ".json";
  return [shard, report, suffix](const std::string& relative) {
    if (relative == report) return true;
    if (relative.size() <= suffix.size() || relative.compare(relative.size() - suffix.size(), suffix.size(),
                                                             suffix) != 0) {
      return false;
    }
    return shard.owns(std::string_view(relative).substr(0, relative.size() - suffix.size()));
  };
}

// JSON Lines: ends with its summary line; the others: exists (output_format.h).
bool result_done(OutputFormat format, const std::string& path) {
  return has_summary_line(format) ? result_is_complete(path) : result_file_exists(path);
}

void report_shard(const BatchOptions& options, const BatchStats& stats) {
  if (!options.shard.sharded() || options.out_dir == "-") return;
  ShardReport report;
  report.index = options.shard.index;
  report.count = options.shard.count;
  report.inputs = stats.shard_inputs;
  report.done = stats.files_ok;
  report.skipped = stats.files_skipped;
  report.audio_seconds = stats.audio_seconds;
  report.wall_seconds = stats.wall_seconds;
  report.failures = stats.failures;
  write_shard_report(options.out_dir, report);
}

// The segment driver above, for a stateless model.
BatchStats run_stateless_inputs(const BatchOptions& options, const ModelConfig& model,
                                const std::vector<BatchInput>& todo, const std::vector<InputError>& errors,
                                Progress& progress, const ExecutorFactory& make_executor) {
  BatchRun run(options, model, progress);
  for (const auto& e : errors) run.fail_input(e.key, e.message);
  Clock::time_point ready, drained;
  {
    std::unique_ptr<Executor> executor =
        make_executor([&run](SegmentResult&& r) { run.on_complete(std::move(r)); });
    ready = Clock::now();
    for (const auto& in : todo) run.process(in, *executor);
    run.flush_opening(*executor);
    executor->wait_idle();
    run.drain();
    drained = Clock::now();
  }
  BatchStats stats = run.stats();
  stats.serving_seconds = std::chrono::duration<double>(drained - ready).count();
  return stats;
}

}  // namespace

BatchStats run_batch(const BatchOptions& options, const ModelConfig& model,
                     const ExecutorFactory& make_executor) {
  const auto start = Clock::now();
  InputList list = shard_inputs(options);
  const std::string extension = result_extension(options.format);
  if (options.out_dir != "-") sweep_stale_temp_files(options.out_dir, owned_temp_files(options.shard, extension));
  std::vector<BatchInput> todo;
  size_t skipped = 0, refused = 0;  // refused: inputs whose result path would leave --out
  for (const auto& in : list.inputs) {
    std::string out;
    try {
      if (options.out_dir != "-") out = result_path(options.out_dir, in.relative, extension);
    } catch (const std::exception& e) {
      list.errors.push_back({in.relative, in.path + ": " + e.what()});
      ++refused;
      continue;
    }
    if (!options.force && !out.empty() && !in.pipe && result_done(options.format, out)) {
      ++skipped;
      continue;
    }
    todo.push_back(in);
  }
  Progress progress(options.progress, todo.size(),
                    options.progress ? total_audio_seconds(todo, options.audio_stream) : 0.0);
  if (options.out_dir == "-") print_stdout_header(options.format);
  BatchStats stats = model.is_stateful()
                         ? run_stateful_inputs(options, model, todo, list.errors, progress, make_executor)
                         : run_stateless_inputs(options, model, todo, list.errors, progress, make_executor);
  stats.files_skipped = skipped;
  stats.shard_inputs = list.inputs.size() + list.errors.size() - refused;  // a refused input is in both
  const auto end = Clock::now();
  stats.wall_seconds = std::chrono::duration<double>(end - start).count();
  report_shard(options, stats);
  return stats;
}

}  // namespace corepool
