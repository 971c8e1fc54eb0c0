// load_model_config() and to_toml(): the model.toml contract in both directions.
// The engine loads it once at startup; the model generator writes it with to_toml(),
// so the two must agree field for field (tests/unit/model_config_test.cc checks).
#include "config/model_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "config/toml_reader.h"

namespace corepool {
namespace {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();
constexpr double kDefaultThreshold = 0.5;

void read_model(TomlReader& reader, ModelConfig& config) {
  config.name = reader.get_string("model.name", config.name);
  const std::string kind = reader.get_string("model.kind", "stateless", {"stateless", "stateful"});
  config.kind = kind == "stateful" ? ModelKind::kStateful : ModelKind::kStateless;
  const std::string input = reader.get_string("model.input", "logmel", {"logmel", "waveform"});
  config.input = input == "waveform" ? InputKind::kWaveform : InputKind::kLogMel;
  config.sample_rate = reader.get_int("model.sample_rate", config.sample_rate, 1000, 192000);
  config.segment_seconds = reader.get_double("model.segment_seconds", config.segment_seconds, 0,
                                             60, TomlReader::Bound::kExclusive);
  config.hop_seconds = reader.get_double("model.hop_seconds", config.hop_seconds, 0, 60,
                                         TomlReader::Bound::kExclusive);
  config.max_batch = reader.get_int("model.max_batch", config.max_batch, 1, 1000000);
}

// A stateful model's chunk is its segment: segment and hop are derived from
// chunk_samples, so giving them as well could only contradict it.
void read_split(TomlReader& reader, StatefulSpec& s) {
  if (!reader.has("stateful.split")) return;
  SplitSpec& split = s.split;
  for (const char* key : {"stateful.split.front", "stateful.split.sequence", "stateful.split.feature_floats"}) {
    reader.require(key);
  }
  split.front = reader.get_string("stateful.split.front", "");
  split.sequence = reader.get_string("stateful.split.sequence", "");
  if (split.front.empty() || split.sequence.empty()) reader.fail("stateful.split", "front and sequence name methods");
  if (split.front == split.sequence) reader.fail("stateful.split.sequence", "must differ from front");
  split.feature_floats = reader.get_int("stateful.split.feature_floats", 0, 1, 1 << 16);
  split.sequence_chunks = reader.get_int("stateful.split.sequence_chunks", split.sequence_chunks, 1, 4096);
  split.source = reader.get_string("stateful.split.source", "");
}

void read_stateful(TomlReader& reader, ModelConfig& config) {
  if (!config.is_stateful()) {
    if (reader.has("stateful")) reader.fail("stateful", "section needs [model] kind = \"stateful\"");
    if (reader.has("events")) reader.fail("events", "section needs [model] kind = \"stateful\"");
    return;
  }
  for (const char* key : {"model.segment_seconds", "model.hop_seconds"}) {
    if (reader.has(key)) reader.fail(key, "not used by a stateful model: [stateful] chunk_samples sets the chunk");
  }
  if (config.input != InputKind::kWaveform) reader.fail("model.input", "must be \"waveform\" for a stateful model");
  StatefulSpec& s = config.stateful;
  s.method = reader.get_string("stateful.method", "");
  reader.require("stateful.chunk_samples");
  s.chunk_samples = reader.get_int("stateful.chunk_samples", s.chunk_samples, 1, 1 << 20);
  s.context_samples = reader.get_int("stateful.context_samples", 0, 0, 1 << 20);
  reader.require("stateful.state_shape");
  s.state_shape = reader.get_int_array("stateful.state_shape", {}, 0, 1 << 20);
  if (std::count(s.state_shape.begin(), s.state_shape.end(), 0) != 1) {
    reader.fail("stateful.state_shape", "must hold exactly one 0, marking the batch dimension");
  }
  int64_t floats = 1;  // checked as it grows: a product of many large dimensions would overflow
  for (const int64_t d : s.state_shape) {
    floats *= std::max<int64_t>(d, 1);
    if (floats > (1 << 20)) reader.fail("stateful.state_shape", "more than 2^20 floats per stream");
  }
  s.state_initial = static_cast<float>(reader.get_double("stateful.state_initial", 0, -1e30, 1e30));
  s.score_output = reader.get_int("stateful.score_output", 0, 0, 15);
  s.state_output = reader.get_int("stateful.state_output", 1, 0, 15);
  if (s.score_output == s.state_output) reader.fail("stateful.state_output", "must differ from score_output");
  s.lane_seconds = reader.get_double("stateful.lane_seconds", 0, 0, kNoLimit);
  s.lane_warmup_seconds = reader.get_double("stateful.lane_warmup_seconds", 0, 0, kNoLimit);
  if (s.lane_seconds > 0 && s.lane_warmup_seconds >= s.lane_seconds) {
    reader.fail("stateful.lane_warmup_seconds", "must be shorter than lane_seconds");
  }
  config.segment_seconds = config.hop_seconds = static_cast<double>(s.chunk_samples) / config.sample_rate;
  read_split(reader, s);
}

void read_event_rules(TomlReader& reader, ModelConfig& config) {
  if (!config.is_stateful()) return;
  EventRules& r = config.rules;
  r.hysteresis = reader.get_double("events.hysteresis", r.hysteresis, 0, 1);
  r.min_speech_ms = reader.get_int("events.min_speech_ms", r.min_speech_ms, 0, 3600000);
  r.min_silence_ms = reader.get_int("events.min_silence_ms", r.min_silence_ms, 0, 3600000);
  r.speech_pad_ms = reader.get_int("events.speech_pad_ms", r.speech_pad_ms, 0, 3600000);
}

// The STFT shape is part of a log-mel model's contract: a silent default would feed
// it spectrograms it was never trained on. A waveform model may omit the section.
void require_features(TomlReader& reader, const ModelConfig& config) {
  if (config.input != InputKind::kLogMel) return;
  if (!reader.has("features")) {
    reader.fail("features", "section is required for input = \"logmel\"");
  }
  for (const char* key : {"features.n_fft", "features.hop_length", "features.n_mels"}) {
    reader.require(key);
  }
}

void read_features(TomlReader& reader, ModelConfig& config) {
  require_features(reader, config);
  config.n_fft = reader.get_int("features.n_fft", config.n_fft, 16, 8192);
  if ((config.n_fft & (config.n_fft - 1)) != 0) {
    reader.fail("features.n_fft", "must be a power of two, got " + std::to_string(config.n_fft));
  }
  config.hop_length = reader.get_int("features.hop_length", config.hop_length, 1, config.n_fft);
  // A waveform model may leave hop_length out and shorten n_fft: the default
  // hop must then fit too, or the file to_toml() writes would not load back.
  if (!reader.has("features.hop_length") && config.hop_length > config.n_fft) {
    reader.fail("features.n_fft", "is " + std::to_string(config.n_fft) + ", less than the default hop_length " +
                                      std::to_string(config.hop_length) + ": set features.hop_length too");
  }
  config.n_mels = reader.get_int("features.n_mels", config.n_mels, 1, 512);
  config.fmin = reader.get_double("features.fmin", config.fmin, 0, kNoLimit);
  config.fmax = reader.get_double("features.fmax", config.fmax, 0, kNoLimit);
}

void read_label_names(TomlReader& reader, ModelConfig& config) {
  reader.require("labels.names");
  config.labels = reader.get_string_array("labels.names", {});
  if (config.labels.empty()) reader.fail("labels.names", "must name at least one label");
  for (size_t i = 0; i < config.labels.size(); ++i) {
    const std::string& label = config.labels[i];
    if (label.empty()) reader.fail("labels.names", "label " + std::to_string(i) + " is empty");
    if (std::find(config.labels.begin(), config.labels.begin() + i, label) !=
        config.labels.begin() + i) {
      reader.fail("labels.names", "duplicate label " + toml_quote(label));
    }
  }
}

void read_thresholds(TomlReader& reader, ModelConfig& config) {
  const double base = reader.get_double("labels.threshold", kDefaultThreshold, 0, 1);
  config.thresholds.assign(config.labels.size(), static_cast<float>(base));
  for (const auto& entry : reader.get_number_table("labels.thresholds", 0, 1)) {
    const auto it = std::find(config.labels.begin(), config.labels.end(), entry.key);
    if (it == config.labels.end()) {
      reader.fail_at(entry.line, entry.path, "not a label in labels.names");
    }
    config.thresholds[it - config.labels.begin()] = static_cast<float>(entry.value);
  }
}

// A quiet label makes EventBuilder move boundaries by the segment's window,
// which only a stateless model's overlapping segments have.
void read_quiet_label(TomlReader& reader, ModelConfig& config) {
  if (!reader.has("labels.quiet")) return;
  if (config.is_stateful()) reader.fail("labels.quiet", "only a stateless model has a quiet label");
  config.quiet_label = reader.get_string("labels.quiet", "");
  if (std::find(config.labels.begin(), config.labels.end(), config.quiet_label) == config.labels.end()) {
    reader.fail("labels.quiet", toml_quote(config.quiet_label) + " is not a label in labels.names");
  }
}

void check_frequencies(TomlReader& reader, const ModelConfig& config) {
  const double nyquist = config.sample_rate / 2.0;
  if (config.fmax > nyquist) {
    reader.fail("features.fmax", "must be at most sample_rate / 2 = " + format_number(nyquist) +
                                     ", got " + format_number(config.fmax));
  }
  const double fmax = config.fmax == 0 ? nyquist : config.fmax;
  if (!(config.fmin < fmax)) {
    reader.fail("features.fmin", "must be below fmax = " + format_number(fmax) + ", got " +
                                     format_number(config.fmin));
  }
}

// Seconds are rounded to whole samples; make sure what is left is usable.
void check_lengths(TomlReader& reader, const ModelConfig& config) {
  const bool logmel = config.input == InputKind::kLogMel;
  const int needed = logmel ? config.n_fft : 1;
  const std::string rate = " samples at " + std::to_string(config.sample_rate) + " Hz, needs ";
  if (config.segment_samples() < needed) {
    reader.fail("model.segment_seconds",
                "gives " + std::to_string(config.segment_samples()) + rate + "at least " +
                    (logmel ? "features.n_fft = " : "") + std::to_string(needed));
  }
  if (config.hop_samples() < 1) {
    reader.fail("model.hop_seconds", "gives 0" + rate + "at least 1");
  }
}

// Marks number text as a TOML float ("8000" -> "8000.0") so it never reads as an integer.
std::string as_toml_float(std::string text) {
  if (text.find_first_of(".en") == std::string::npos) text += ".0";  // "n": inf, nan
  return text;
}

std::string toml_float(double value) { return as_toml_float(format_number(value)); }

// Thresholds are floats but are read back as doubles and narrowed. Keep the short
// form ("0.6") only when that path lands on the same float; else write the exact value.
std::string threshold_text(float value) {
  char buffer[64];
  const auto written = std::to_chars(buffer, buffer + sizeof buffer, value);
  double reread = 0;
  std::from_chars(buffer, written.ptr, reread);
  if (static_cast<float>(reread) != value) return toml_float(value);
  return as_toml_float(std::string(buffer, written.ptr));
}

// The most common threshold becomes [labels] threshold so only exceptions are listed.
float base_threshold(const std::vector<float>& thresholds) {
  float best = static_cast<float>(kDefaultThreshold);
  long best_count = 0;
  for (const float value : thresholds) {
    const long count = std::count(thresholds.begin(), thresholds.end(), value);
    if (count > best_count) {
      best = value;
      best_count = count;
    }
  }
  return best;
}

void write_model(std::ostream& out, const ModelConfig& config) {
  const bool logmel = config.input == InputKind::kLogMel;
  out << "[model]\n"
      << "name = " << toml_quote(config.name) << "\n";
  if (config.is_stateful()) out << "kind = \"stateful\"  # stateless | stateful\n";
  out << "input = \"" << (logmel ? "logmel" : "waveform") << "\"  # logmel | waveform\n"
      << "sample_rate = " << config.sample_rate << "\n";
  if (!config.is_stateful()) {
    out << "segment_seconds = " << toml_float(config.segment_seconds) << "\n"
        << "hop_seconds = " << toml_float(config.hop_seconds) << "\n";
  }
  out << "max_batch = " << config.max_batch << "\n";
}

void write_split(std::ostream& out, const SplitSpec& split) {
  if (!split.enabled()) return;
  out << "\n[stateful.split]\n"
      << "front = " << toml_quote(split.front) << "\n"
      << "sequence = " << toml_quote(split.sequence) << "\n"
      << "feature_floats = " << split.feature_floats << "\n"
      << "sequence_chunks = " << split.sequence_chunks << "\n";
  if (!split.source.empty()) out << "source = " << toml_quote(split.source) << "\n";
}

void write_stateful(std::ostream& out, const ModelConfig& config) {
  if (!config.is_stateful()) return;
  const StatefulSpec& s = config.stateful;
  out << "\n[stateful]\n"
      << "method = " << toml_quote(s.method) << "\n"
      << "chunk_samples = " << s.chunk_samples << "\n"
      << "context_samples = " << s.context_samples << "\n"
      << "state_shape = [";
  for (size_t i = 0; i < s.state_shape.size(); ++i) out << (i ? ", " : "") << s.state_shape[i];
  out << "]  # 0 marks the batch dimension\n"
      << "state_initial = " << threshold_text(s.state_initial) << "\n"
      << "score_output = " << s.score_output << "\n"
      << "state_output = " << s.state_output << "\n"
      << "lane_seconds = " << toml_float(s.lane_seconds) << "  # 0 = one lane per file (exact)\n"
      << "lane_warmup_seconds = " << toml_float(s.lane_warmup_seconds) << "\n";
  write_split(out, s.split);
  const EventRules& r = config.rules;
  out << "\n[events]\n"
      << "hysteresis = " << toml_float(r.hysteresis) << "\n"
      << "min_speech_ms = " << r.min_speech_ms << "\n"
      << "min_silence_ms = " << r.min_silence_ms << "\n"
      << "speech_pad_ms = " << r.speech_pad_ms << "\n";
}

void write_features(std::ostream& out, const ModelConfig& config) {
  out << "\n[features]\n"
      << "n_fft = " << config.n_fft << "\n"
      << "hop_length = " << config.hop_length << "\n"
      << "n_mels = " << config.n_mels << "\n"
      << "fmin = " << toml_float(config.fmin) << "\n"
      << "fmax = " << toml_float(config.fmax) << "  # 0 = sample_rate / 2\n";
}

void write_labels(std::ostream& out, const ModelConfig& config) {
  out << "\n[labels]\nnames = [";
  for (size_t i = 0; i < config.labels.size(); ++i) {
    out << (i ? ", " : "") << toml_quote(config.labels[i]);
  }
  const float base = base_threshold(config.thresholds);
  out << "]\nthreshold = " << threshold_text(base) << "\n";
  if (!config.quiet_label.empty()) out << "quiet = " << toml_quote(config.quiet_label) << "\n";
  bool header_written = false;
  for (size_t i = 0; i < config.labels.size(); ++i) {
    if (config.thresholds[i] == base) continue;
    if (!header_written) out << "\n[labels.thresholds]  # per label, overrides threshold\n";
    header_written = true;
    out << toml_key(config.labels[i]) << " = " << threshold_text(config.thresholds[i]) << "\n";
  }
}

}  // namespace

std::optional<size_t> ModelConfig::quiet_index() const {
  const auto it = std::find(labels.begin(), labels.end(), quiet_label);
  if (quiet_label.empty() || it == labels.end()) return std::nullopt;
  return static_cast<size_t>(it - labels.begin());
}

int ModelConfig::segment_samples() const {
  return static_cast<int>(std::lround(segment_seconds * sample_rate));
}

int ModelConfig::hop_samples() const {
  return static_cast<int>(std::lround(hop_seconds * sample_rate));
}

int ModelConfig::frames_per_segment() const { return 1 + segment_samples() / hop_length; }

// Must match FeatureExtractor::compute(): [B, 1, n_mels, frames] or [B, samples].
std::vector<int64_t> ModelConfig::item_shape() const {
  if (is_stateful()) return {task_floats()};
  if (input == InputKind::kWaveform) return {segment_samples()};
  return {1, n_mels, frames_per_segment()};
}

int StatefulSpec::batch_dim() const {
  return static_cast<int>(std::find(state_shape.begin(), state_shape.end(), 0) - state_shape.begin());
}

int64_t StatefulSpec::state_floats() const {
  int64_t n = 1;
  for (const int64_t d : state_shape) n *= d == 0 ? 1 : d;
  return n;
}

int64_t ModelConfig::task_floats() const {
  if (!is_stateful()) return segment_samples();
  return stateful.context_samples + stateful.chunk_samples + stateful.state_floats();
}

int64_t ModelConfig::result_floats() const {
  const int64_t labels_n = static_cast<int64_t>(labels.size());
  return is_stateful() ? labels_n + stateful.state_floats() : labels_n;
}

int64_t ModelConfig::slot_task_floats() const {
  const SplitSpec& split = stateful.split;
  if (!is_stateful() || !split.enabled()) return task_floats();
  return std::max(task_floats(), split.sequence_chunks * split.feature_floats + stateful.state_floats());
}

int64_t ModelConfig::slot_result_floats() const {
  const SplitSpec& split = stateful.split;
  if (!is_stateful() || !split.enabled()) return result_floats();
  const int64_t sequence = split.sequence_chunks * static_cast<int64_t>(labels.size()) + stateful.state_floats();
  return std::max({result_floats(), split.feature_floats, sequence});
}

int64_t ModelConfig::item_floats() const {
  int64_t n = 1;
  for (const int64_t d : item_shape()) n *= d;
  return n;
}

ModelConfig load_model_config(const std::string& path) {
  TomlReader reader(path);
  ModelConfig config;
  read_model(reader, config);
  read_stateful(reader, config);
  read_event_rules(reader, config);
  read_features(reader, config);
  read_label_names(reader, config);
  read_thresholds(reader, config);
  read_quiet_label(reader, config);
  reader.check_no_unknown_keys();
  // Cross-field checks last: each field is known to be well-formed by now.
  check_frequencies(reader, config);
  check_lengths(reader, config);
  return config;
}

std::string to_toml(const ModelConfig& config) {
  if (config.thresholds.size() != config.labels.size()) {
    throw std::invalid_argument("to_toml: thresholds must hold one value per label");
  }
  if (!config.quiet_label.empty() && !config.quiet_index()) {
    throw std::invalid_argument("to_toml: quiet label " + toml_quote(config.quiet_label) + " is not a label");
  }
  std::ostringstream out;
  out << "# Model contract, read by corepool's load_model_config() (config/model_config.h).\n";
  write_model(out, config);
  write_stateful(out, config);
  write_features(out, config);
  write_labels(out, config);
  return out.str();
}

}  // namespace corepool
