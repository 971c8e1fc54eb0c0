// The model contract: a model is a directory with model.pt (TorchScript) and
// model.toml (input kind, sample rate, feature parameters, segment length,
// labels, thresholds). Parsed once at startup by the engine; a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace corepool {

enum class InputKind { kLogMel, kWaveform };

// stateless: one forward(item) per independent segment. stateful: a streaming
// model whose method takes (x [B, context + chunk], state) and returns
// (scores, new state); the state travels inside each task (see StatefulSpec).
enum class ModelKind { kStateless, kStateful };

// [stateful.split] (optional): the method's network cut where its state
// enters, so that one stream's chunks need not run one call each. `front` is
// stateless per chunk: x [N, context + chunk] -> [N, feature_floats]. Its
// partner `sequence` runs T consecutive chunks of N streams through the
// recurrence in one call: (features [T, N, feature_floats], state with batch
// N) -> (scores [T, N, labels], state). Both are methods of the method's module;
// `source` is TorchScript that defines them there at load
// (torch::jit::Module::define), "" when model.pt has them already. Every engine
// checks them against the method run chunk by chunk before it serves.
struct SplitSpec {
  std::string front, sequence, source;
  int64_t feature_floats = 0;
  int sequence_chunks = 64;  // at most T chunks per sequence call
  bool enabled() const { return !front.empty(); }
};

// [stateful]: how a streaming model is called, one chunk of each stream per
// batch item. A task of such a model holds context + chunk samples followed by
// the stream's state (state_floats(), the state's shape with batch 1, row-major);
// its result holds the label scores followed by the new state, same layout.
struct StatefulSpec {
  std::string method;              // submodule path ("_model", "a.b") whose forward runs; "" = forward
  int chunk_samples = 512;         // new samples per call
  int context_samples = 0;         // the previous chunk's last samples put in front (zeros at the start)
  std::vector<int64_t> state_shape;  // with 0 at the batch dimension, e.g. [2, 0, 128]
  float state_initial = 0.0f;      // every state element of a new stream
  int score_output = 0;            // which element of the returned tuple holds [B, labels]
  int state_output = 1;            // which holds the new state
  // Batch driver: a long file is cut into lanes that run in parallel; each lane
  // after the first starts lane_warmup_seconds early from a fresh state and its
  // warm-up scores are discarded. 0 = one lane per file (exact).
  double lane_seconds = 0;
  double lane_warmup_seconds = 0;
  SplitSpec split;
  int batch_dim() const;           // index of the 0 in state_shape
  int64_t state_floats() const;    // product of state_shape, batch dim as 1
};

// [events] of a stateful model: speech-detector rules (Silero's
// get_speech_timestamps), applied per label to the per-chunk scores.
struct EventRules {
  double hysteresis = 0.15;        // off when score < threshold - hysteresis
  int min_speech_ms = 250;         // shorter events are dropped
  int min_silence_ms = 100;        // shorter gaps do not end an event
  int speech_pad_ms = 30;          // each event grows by this much on both sides
};

struct ModelConfig {
  std::string name;                   // [model] name
  InputKind input = InputKind::kLogMel;  // [model] input = "logmel" | "waveform"
  int sample_rate = 16000;            // [model] sample_rate, Hz (1000..192000)
  double segment_seconds = 1.0;       // [model] segment_seconds (0 < s <= 60)
  double hop_seconds = 0.5;           // [model] hop_seconds (0 < h <= 60)
  int n_fft = 512;                    // [features] n_fft (power of two, 16..8192)
  int hop_length = 160;               // [features] hop_length in samples (1..n_fft)
  int n_mels = 64;                    // [features] n_mels (1..512)
  double fmin = 0.0;                  // [features] fmin, Hz (>= 0)
  double fmax = 0.0;                  // [features] fmax, Hz (0 = sample_rate / 2)
  std::vector<std::string> labels;    // [labels] names (non-empty, unique)
  std::vector<float> thresholds;      // one per label: [labels] threshold (default 0.5),
                                      // overridden per label by [labels.thresholds]
  std::string quiet_label;            // [labels] quiet: a label a segment only gets when
                                      // nothing in its window sounds ("" = none; stateless)
  int max_batch = 64;                 // [model] max_batch the module accepts (>= 1)
  ModelKind kind = ModelKind::kStateless;  // [model] kind = "stateless" | "stateful"
  StatefulSpec stateful;              // [stateful], kind = "stateful" only
  EventRules rules;                   // [events], kind = "stateful" only

  bool is_stateful() const { return kind == ModelKind::kStateful; }
  // quiet_label's position in labels, for EventBuilder; none when unset.
  std::optional<size_t> quiet_index() const;
  // Floats of one task and of one result: stateless, segment_samples() and
  // labels.size(); stateful, context + chunk + state and labels + state.
  int64_t task_floats() const;
  int64_t result_floats() const;
  // The largest task and result of any kind the model takes: those above, or
  // with a split its front and its longest sequence (process mode's slots).
  int64_t slot_task_floats() const;
  int64_t slot_result_floats() const;

  // Segment length and hop in samples at sample_rate (rounded to nearest).
  int segment_samples() const;
  int hop_samples() const;
  // Frames of log-mel per segment: 1 + segment_samples / hop_length (centered STFT).
  int frames_per_segment() const;
  // The model's input for ONE item, batch dim left out, as the feature step
  // lays it out: log-mel {1, n_mels, frames}, waveform {segment_samples},
  // stateful {task_floats()} (samples and state, as a PCM task holds them).
  // A model-input request (KServe v2 infer) must hold exactly item_floats()
  // floats in this shape, row-major.
  std::vector<int64_t> item_shape() const;
  int64_t item_floats() const;
};

// Parses `path` (a model.toml). Throws ConfigError naming file, line and key.
ModelConfig load_model_config(const std::string& path);

// Serializes back to TOML text (used by the model generator so that the file
// it writes is exactly what load_model_config reads).
std::string to_toml(const ModelConfig& config);

}  // namespace corepool
