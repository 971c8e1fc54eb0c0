// Deterministic test and demo audio: a timeline of sections (tone, chord,
// noise, silence, click train) written with libsndfile block by block, so a
// multi-hour file costs no memory. Used by corepool-gen-audio, the tests and
// the benchmarks. Never by the service itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corepool::synth {

enum class Kind { kTone, kChord, kNoise, kSilence, kClicks };

struct Section {
  Kind kind = Kind::kSilence;
  double seconds = 1.0;
  double frequency = 440.0;  // tone / chord root / click rate, Hz
  double gain = 0.5;         // peak amplitude in [0, 1]
};

struct FileSpec {
  int sample_rate = 16000;
  int channels = 1;           // every channel carries the same signal
  std::string format = "wav"; // "wav" (PCM16) | "wavf" (float32 WAV) | "flac" | "ogg"
  uint64_t seed = 1;          // noise generator seed
  std::vector<Section> sections;  // played in order, repeated `repeat` times
  int repeat = 1;
};

// Writes the file; throws std::runtime_error("<path>: <reason>") on failure.
void write_audio(const std::string& path, const FileSpec& spec);

// Writes mono float samples as a 16-bit WAV; throws like write_audio.
void write_samples(const std::string& path, const std::vector<float>& mono, int sample_rate);

// Total length of the file `spec` describes, in seconds.
double duration_seconds(const FileSpec& spec);

// The demo timeline used by `make run`: tone, noise, silence, chord, clicks ...
FileSpec demo_spec();

// The demo timeline repeated to last about `seconds` (at least once), at `sample_rate`:
// the generated input of tests and benchmarks.
FileSpec demo_of_seconds(double seconds, int sample_rate = 16000);

// Parses "tone:2,noise:1.5,silence:1,chord:3@220" (kind:seconds[@frequency]).
// Throws std::invalid_argument naming the bad item.
std::vector<Section> parse_sections(const std::string& text);

// Damaged files for validation tests (all written into `dir`, returns paths):
// not_audio.wav (text), empty.wav (header, zero frames), truncated.wav (header
// says more frames than present), zero_rate.wav (patched header: 0 Hz),
// many_channels.wav (40 channels), nan.wav (float WAV with a NaN sample),
// inf.wav (float WAV with +Inf), zero_bytes.wav (0-byte file).
std::vector<std::string> write_damaged_files(const std::string& dir);

}  // namespace corepool::synth
