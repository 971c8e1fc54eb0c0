// The stateful batch driver. The calling thread (with one helper per further
// cpu) decodes files whole, hands their samples to a scorer
// (stateful_scorer.h: a split model's SplitScorer, whose fronts of any
// chunks fill a call; else the StreamScorer, which cuts each file in lanes
// and threads each lane's state through its chunks), and otherwise only
// pumps: it submits what is ready together, so an engine finds up to
// max_batch chunks queued and runs them in one call. Files are opened while the live lanes leave room in the executor's
// queue (the first ones while the engines start), so a directory of short
// clips and one long file in lanes both keep every engine's batch full. A
// file's events are made from all its scores at once (speech_events.h) and
// committed on a SerialWorker, like the stateless driver's.
// A file longer than kWholeSeconds goes to a scorer that takes blocks (the
// split's) as soon as its first kWholeSeconds are decoded; the feeding thread
// decodes the rest between pumps, while the engines run what is in, and the
// scorer lets go of the samples its fronts have read. Otherwise (lanes need
// random access) files are decoded whole, 64 KB per second of audio at 16
// kHz: memory grows with the open files (up to a window of them beyond the
// queue's room), unlike the stateless driver.
#include "supervisor/batch/stateful_batch.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "audio/audio_stream.h"
#include "audio/event_json.h"
#include "audio/speech_events.h"
#include "supervisor/batch/commit_input.h"
#include "supervisor/batch/event_filter.h"
#include "supervisor/batch/parallel_each.h"
#include "supervisor/batch/result_path.h"
#include "supervisor/batch/result_writer.h"
#include "supervisor/batch/serial_worker.h"
#include "supervisor/batch/stateful_scorer.h"
#include "supervisor/batch/tally.h"
#include "worker/host/cpus.h"

namespace corepool {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr size_t kOpenWindow = 4;    // files per cpu opened at once (open_window())
constexpr size_t kEarlyLanes = 256;  // lanes opened before the engines are up at most (open_until())
// Files up to this long decode whole when opened (on every cpu, open_window());
// longer ones go on decoding on the feeding thread (decode_next()).
constexpr double kWholeSeconds = 30.0;
// A file decoding on the feeding thread stays this far ahead of the fronts
// sent, at most: its samples in memory (64 KB a second at 16 kHz).
constexpr double kDecodeAheadSeconds = 60.0;
constexpr size_t kBlockFrames = 32768;  // samples a read() appends
// The samples at the model's rate the header promises, at most kWholeSeconds'
// (a header may lie), and a block more (a read appends up to a block, and the
// resampler rounds): reserved before decoding, so that the samples are not
// copied and faulted in again at every doubling.
size_t samples_to_reserve(const AudioInfo& info, int model_rate) {
  if (info.sample_rate <= 0 || info.frames <= 0) return 0;
  const double stated = static_cast<double>(info.frames) * model_rate / info.sample_rate;
  return static_cast<size_t>(std::min(stated, kWholeSeconds * model_rate)) + kBlockFrames;
}

struct StreamFile {
  BatchInput input;
  std::unique_ptr<ResultWriter> out;
  int64_t samples = 0;
  std::vector<float> scores;  // chunk-major, from the StreamScorer
  std::string error;
  json skipped;
  std::string warning;  // what its decoding skipped, as a line for the user
  Clock::time_point started = Clock::now();
};

class StatefulRun {
 public:
  StatefulRun(const BatchOptions& options, const ModelConfig& model, Progress& progress)
      : options_(options), model_(model), progress_(progress),
        scorer_(make_stateful_scorer(model, [this](uint64_t id, std::vector<float> scores, const std::string& error) {
          scored(id, std::move(scores), error);
        })) {
    output_.format = options.format;
    output_.high_freq_hz = model.sample_rate / 2.0;
  }

  // Opens files until started() says the engines are up (see open_until()).
  void open_until(const std::vector<BatchInput>& todo, const std::function<bool()>& started);
  void run(const std::vector<BatchInput>& todo, Executor& executor);
  void on_complete(SegmentResult&& r) { scorer_->on_complete(std::move(r)); }
  void fail_input(const std::string& key, const std::string& message);
  void drain() { committer_.drain(); }
  BatchStats& stats() { return stats_; }
  size_t laned_files() { return scorer_->laned_streams(); }

 private:
  struct Opened {
    std::unique_ptr<StreamFile> file;
    std::shared_ptr<std::vector<float>> samples;
    std::unique_ptr<AudioStream> rest;  // set if the file goes on past what prepare() decoded
    std::string error;    // why it could not be opened: reported by admit()
  };
  struct Decoding {  // a file admitted while its decoding goes on
    uint64_t id;
    StreamFile* file;  // in files_ until the scorer is done with it, after close()
    std::unique_ptr<AudioStream> stream;
  };
  Opened prepare(const BatchInput& input);  // never throws; any thread
  void admit(Opened&& opened);
  bool open_window(const std::vector<BatchInput>& todo);
  // Whether the feeding thread should decode a block now: a file is decoding
  // and the scorer's unsent fronts are under kDecodeAheadSeconds.
  bool should_decode();
  void decode_next();  // one block of the first file decoding, or its end
  void note_skipped(StreamFile& file, const AudioStream& stream);
  void scored(uint64_t id, std::vector<float> scores, const std::string& error);  // feeding thread
  void commit(std::shared_ptr<StreamFile> file);  // on committer_
  void write_results(StreamFile& file);           // on committer_: its events and summary
  void settle(StreamFile& file);                  // counts a committed or failed file
  std::vector<Event> events_of(const StreamFile& file) const;

  const BatchOptions& options_;
  const ModelConfig& model_;
  Progress& progress_;
  OutputSpec output_;
  std::mutex mu_;  // stats_ and progress_ lines (the committer and the feeding thread)
  std::map<uint64_t, std::unique_ptr<StreamFile>> files_;  // the feeding thread's own
  std::deque<Decoding> decoding_;                          // the feeding thread's own, in admission order
  uint64_t next_id_ = 0;
  size_t next_input_ = 0;                  // the first input not yet opened
  const int openers_ = usable_cpus().usable;  // threads that open files
  BatchStats stats_;
  std::unique_ptr<StatefulScorer> scorer_;  // stateful_scorer.h: the split's, or chunk by chunk
  CommitGroup commits_;     // results written, not yet in place: the committer's own
  SerialWorker committer_;  // last: its thread stops before the members it uses go
};

// Decodes the input (whole, or its first kWholeSeconds if the scorer takes
// blocks) and creates its result file; safe on any thread (of the run it
// reads only constants, and output_ whose writers share an atomic).
StatefulRun::Opened StatefulRun::prepare(const BatchInput& input) {
  Opened opened;
  opened.file = std::make_unique<StreamFile>();
  opened.file->input = input;
  opened.samples = std::make_shared<std::vector<float>>();
  try {
    std::unique_ptr<AudioStream> stream =
        input.pipe ? std::make_unique<AudioStream>(AudioSource::standard_input(kStdinName, options_.raw),
                                                   model_.sample_rate, kBlockFrames, options_.audio_stream)
                   : std::make_unique<AudioStream>(input.path, model_.sample_rate, kBlockFrames, options_.audio_stream);
    const size_t whole = scorer_->takes_blocks() ? static_cast<size_t>(kWholeSeconds * model_.sample_rate) : SIZE_MAX;
    opened.samples->reserve(samples_to_reserve(stream->info(), model_.sample_rate));
    bool more = true;
    while (opened.samples->size() < whole && (more = stream->read(*opened.samples))) {
    }
    if (more) {
      opened.rest = std::move(stream);
    } else {
      note_skipped(*opened.file, *stream);
    }
    // Validated and read before the result file exists: an error found so far
    // leaves no result (one found later abandons its temporary file).
    const std::string out_path = options_.out_dir == "-" ? ""
                                                         : result_path(options_.out_dir, input.relative,
                                                                       result_extension(options_.format));
    opened.file->out = std::make_unique<ResultWriter>(
        output_, input.relative, input.path, out_path.empty() ? nullptr : std::make_unique<ResultFile>(out_path));
  } catch (const std::exception& e) {
    opened.error = e.what();
  }
  return opened;
}

void StatefulRun::note_skipped(StreamFile& file, const AudioStream& stream) {
  if (stream.skipped().empty()) return;
  file.skipped = skipped_json(stream.skipped());
  file.warning = "warning: " + file.input.path + ": " + skipped_text(stream.skipped());
}

// On the feeding thread, in the inputs' order: the file becomes a stream,
// whole or open while the rest decodes.
void StatefulRun::admit(Opened&& opened) {
  if (!opened.error.empty()) {
    fail_input(opened.file->input.relative, opened.error);
    return;
  }
  if (!opened.file->warning.empty()) progress_.print_line(opened.file->warning);
  opened.file->samples = static_cast<int64_t>(opened.samples->size());
  const uint64_t id = next_id_++;
  StreamFile* file = opened.file.get();
  files_[id] = std::move(opened.file);
  if (!opened.rest) {
    scorer_->add(id, std::move(opened.samples));
    return;
  }
  const AudioInfo& info = opened.rest->info();
  const double seconds = info.sample_rate > 0 ? static_cast<double>(info.frames) / info.sample_rate : 0.0;
  const auto expected = static_cast<int64_t>(seconds * model_.sample_rate);
  scorer_->open(id, std::move(opened.samples), expected);
  decoding_.push_back({id, file, std::move(opened.rest)});
}

bool StatefulRun::should_decode() {
  const auto ahead = static_cast<size_t>(kDecodeAheadSeconds * model_.sample_rate / model_.stateful.chunk_samples);
  return !decoding_.empty() && scorer_->live_lanes() < ahead;
}

// A decoding error ends the file as failed (its result file abandoned), with
// the error AudioStream names it by; the scorer's stream ends once its tasks
// out are back.
void StatefulRun::decode_next() {
  Decoding& d = decoding_.front();
  auto block = std::make_shared<std::vector<float>>();
  block->reserve(kBlockFrames);
  try {
    if (d.stream->read(*block)) {
      d.file->samples += static_cast<int64_t>(block->size());
      scorer_->extend(d.id, std::move(block));
      return;
    }
    note_skipped(*d.file, *d.stream);
    if (!d.file->warning.empty()) progress_.print_line(d.file->warning);
    scorer_->close(d.id, "");
  } catch (const std::exception& e) {
    d.file->error = e.what();
    scorer_->close(d.id, e.what());
  }
  decoding_.pop_front();
}

void StatefulRun::scored(uint64_t id, std::vector<float> scores, const std::string& error) {
  auto it = files_.find(id);
  std::shared_ptr<StreamFile> file = std::move(it->second);
  files_.erase(it);
  file->scores = std::move(scores);
  if (!error.empty() && file->error.empty()) file->error = file->input.path + ": " + error;
  progress_.add_segments(file->scores.size() / model_.labels.size());
  progress_.add_audio_seconds(static_cast<double>(file->samples) / model_.sample_rate);
  committer_.post([this, file] { commit(file); });
}

// Opens the next window of files (kOpenWindow per cpu) on every cpu and makes
// them streams in the inputs' order. While files open, the engines have nothing
// new to run, and one thread decoding left the other cpus idle (200 files of
// 3 s: 70 ms on one thread, a fifth of the run, AMD EPYC Zen 5). False when
// every input is open.
bool StatefulRun::open_window(const std::vector<BatchInput>& todo) {
  if (next_input_ >= todo.size()) return false;
  const size_t n = std::min(todo.size() - next_input_, kOpenWindow * static_cast<size_t>(openers_));
  std::vector<Opened> opened(n);
  parallel_each(n, openers_, [&](size_t i) { opened[i] = prepare(todo[next_input_ + i]); });
  for (Opened& o : opened) admit(std::move(o));
  next_input_ += n;
  return true;
}

// While the engines start (each warms up on a full batch, tens of ms, and
// LibTorch optimises their shared graph one engine at a time), the first files
// open on the cpus they leave idle, up to kEarlyLanes.
// A long file's decoding goes on meanwhile too.
void StatefulRun::open_until(const std::vector<BatchInput>& todo, const std::function<bool()>& started) {
  while (!started()) {
    if (scorer_->live_lanes() < kEarlyLanes && open_window(todo)) continue;
    if (!should_decode()) break;
    decode_next();
  }
}

// Files open while the live lanes fit the executor's queue (one task each at
// most), all that fit before their lanes go out together. Sending each file's
// lane as soon as it was open made the engines run calls of a few chunks while
// the next files decoded, on the cpus the decoding needed: 200 files of 3 s
// took 1.1 s to open here (`strace -tt`), each lane starting that much later,
// against about 0.1 s opened in one go before the first call. A window may
// overshoot the queue by a few files' lanes; pump() then submits one by one.
void StatefulRun::run(const std::vector<BatchInput>& todo, Executor& executor) {
  // Half the queue: an engine call's lanes submit their next chunks before
  // the call's own tasks leave the queue's count (StreamScorer::attach()).
  const size_t room = std::max<size_t>(1, executor.stats().depth / 2);
  scorer_->attach(&executor);
  // A block decoded, then a pump that does not wait: its fronts go at once.
  for (;;) {
    while (scorer_->live_lanes() < room && open_window(todo)) {
    }
    const bool decode = should_decode();
    if (decode) decode_next();
    if (!scorer_->pump(executor, !decode) && next_input_ >= todo.size() && decoding_.empty()) break;
  }
  scorer_->attach(nullptr);
}

std::vector<Event> StatefulRun::events_of(const StreamFile& file) const {
  const size_t labels = model_.labels.size();
  const size_t chunks = file.scores.size() / labels;
  const EventRules& r = model_.rules;
  const auto samples = [&](int ms) { return static_cast<int64_t>(ms) * model_.sample_rate / 1000; };
  std::vector<Event> events;
  for (size_t l = 0; l < labels; ++l) {
    std::vector<float> probs(chunks);
    for (size_t c = 0; c < chunks; ++c) probs[c] = file.scores[c * labels + l];
    const SpeechRules rules{model_.thresholds[l], r.hysteresis, samples(r.min_speech_ms), samples(r.min_silence_ms),
                            samples(r.speech_pad_ms)};
    for (const SpeechSpan& s : speech_spans(probs, model_.stateful.chunk_samples, file.samples, rules)) {
      events.push_back({static_cast<double>(s.start) / model_.sample_rate,
                        static_cast<double>(s.end) / model_.sample_rate, model_.labels[l], s.score});
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.start < b.start; });
  return events;
}

void StatefulRun::write_results(StreamFile& file) {
  const double duration = static_cast<double>(file.samples) / model_.sample_rate;
  size_t count = 0;
  EventFilter filter(options_.filter, [&](const Event& e) {
    ++count;
    file.out->event(e);
  });
  for (const Event& e : events_of(file)) filter.add(e);
  filter.finish();
  const double wall = std::chrono::duration<double>(Clock::now() - file.started).count();
  json summary = {{"duration", rounded(duration, 1e3)}, {"segments", file.scores.size() / model_.labels.size()},
                  {"events", count}, {"wall_seconds", rounded(wall, 1e3)},
                  {"x_realtime", rounded(wall > 0 ? duration / wall : 0.0, 1e1)}};
  if (!file.skipped.is_null()) summary["skipped"] = file.skipped;
  file.out->summary(std::move(summary));
}

// Its result file joins the group, which the last commit queued (or a full
// group) puts in place.
void StatefulRun::commit(std::shared_ptr<StreamFile> file) {
  commit_input(
      file, commits_, [this](StreamFile& f) { write_results(f); }, [this](StreamFile& f) { settle(f); },
      [this] { return committer_.queued(); });
}

void StatefulRun::settle(StreamFile& file) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file.error.empty()) {
    tally_done(stats_, progress_, file.scores.size() / model_.labels.size(),
               static_cast<double>(file.samples) / model_.sample_rate);
  } else {
    tally_failed(stats_, progress_, file.input.relative, file.error);
  }
}

void StatefulRun::fail_input(const std::string& key, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  tally_failed(stats_, progress_, key, message);
}

}  // namespace

BatchStats run_stateful_inputs(const BatchOptions& options, const ModelConfig& model,
                               const std::vector<BatchInput>& todo, const std::vector<InputError>& errors,
                               Progress& progress, const ExecutorFactory& make_executor) {
  StatefulRun run(options, model, progress);
  for (const auto& e : errors) run.fail_input(e.key, e.message);
  const Clock::time_point begun = Clock::now();
  Clock::time_point ready, drained;
  {
    std::future<std::unique_ptr<Executor>> starting = std::async(std::launch::async, [&] {
      return make_executor([&run](SegmentResult&& r) { run.on_complete(std::move(r)); });
    });
    run.open_until(todo, [&] { return starting.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    std::unique_ptr<Executor> executor = starting.get();  // rethrows what stopped the engines from starting
    ready = Clock::now();
    run.run(todo, *executor);
    executor->wait_idle();
    run.drain();
    drained = Clock::now();
    // How full the calls were is what decides this driver's speed.
    const ExecutorStats s = executor->stats();
    double busy = 0;
    for (const double b : s.busy_seconds) busy += b;
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    spdlog::info("stateful model: {} chunks in {} calls (mean batch {:.1f}), engines busy {:.2f} s in all; engines "
                 "taking work {:.2f} s into the run, every result in {:.2f} s after that",
                 s.segments, s.batches, s.batches ? static_cast<double>(s.segments) / s.batches : 0.0, busy,
                 seconds(ready - begun), seconds(drained - ready));
    // Lanes change what a stateful model says near each lane's start
    // (docs/models.md measures how much): say so whenever they ran.
    if (const size_t laned = run.laned_files(); laned > 0) {
      spdlog::info("{} file(s) longer than {:g} s ran as lanes ({:g} s warm-ups): scores near each lane's start can "
                   "differ from the model run through the file whole; --lane-seconds 0 runs each file whole",
                   laned, model.stateful.lane_seconds, model.stateful.lane_warmup_seconds);
    }
  }
  BatchStats stats = run.stats();
  stats.serving_seconds = std::chrono::duration<double>(drained - ready).count();
  return stats;
}

}  // namespace corepool
