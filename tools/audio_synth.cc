// The synthesiser behind corepool-gen-audio, the tests and the benchmarks.
// A Timeline produces mono samples block by block from the spec alone (sample
// index + one seeded generator), so output is reproducible and memory is one
// block. write_audio owns the libsndfile handle and removes a partial file on
// failure; write_damaged_files builds on it and then breaks the results.
#include "tools/audio_synth.h"

#include <fcntl.h>
#include <sndfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace corepool::synth {
namespace {

constexpr size_t kBlockFrames = 4096;
constexpr double kTwoPi = 6.283185307179586476925;
constexpr double kFadeSeconds = 0.010;   // tone/chord ramps: no clicks at section edges
constexpr double kClickSeconds = 0.001;  // each click is a 1 ms pulse
constexpr int kMaxWriteChannels = 1024;  // libsndfile's own limit

struct SfCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndFilePtr = std::unique_ptr<SNDFILE, SfCloser>;

int64_t section_frames(const Section& s, int rate) { return std::llround(s.seconds * rate); }

// sin(2*pi*f*i/rate) with the whole cycles removed first, so hours into a
// section the phase keeps full precision.
double sine(double frequency, int64_t i, int rate) {
  double cycles = frequency * double(i) / rate;
  cycles -= std::floor(cycles);
  return std::sin(kTwoPi * cycles);
}

// Linear ramp over the first and last kFadeSeconds (at most half the section).
double fade(int64_t i, int64_t frames, int rate) {
  const double ramp = std::min(kFadeSeconds * rate, frames / 2.0);
  if (ramp < 1.0) return 1.0;
  const double edge = double(std::min(i, frames - 1 - i));
  return edge < ramp ? edge / ramp : 1.0;
}

// Uniform in [-1, 1) from the top 24 bits of one raw draw. Spelled out instead
// of std::uniform_real_distribution, whose algorithm differs between standard
// libraries; mt19937_64's raw output is fixed by the standard.
float noise_sample(std::mt19937_64& rng) {
  const uint64_t top = rng() >> 40;
  return float(double(top) * (2.0 / 16777216.0) - 1.0);
}

bool in_click(double rate_hz, int64_t i, int rate) {
  const int64_t k = int64_t(std::floor(double(i) * rate_hz / rate));
  const int64_t onset = int64_t(std::ceil(double(k) * rate / rate_hz));
  const int64_t width = std::max<int64_t>(1, std::llround(kClickSeconds * rate));
  return i >= onset && i - onset < width;
}

// The spec's sections in order, `repeat` times, as a stream of mono samples.
class Timeline {
 public:
  explicit Timeline(const FileSpec& spec) : spec_(spec), rng_(spec.seed) {}

  // Fills up to n samples; returns how many (0 at the end).
  size_t fill(float* out, size_t n) {
    size_t done = 0;
    while (done < n && advance_to_live_section()) {
      const Section& s = spec_.sections[section_];
      const int64_t frames = section_frames(s, spec_.sample_rate);
      while (done < n && pos_ < frames) out[done++] = sample(s, pos_++, frames);
    }
    return done;
  }

 private:
  // Skips finished (and zero-length) sections; false once the timeline ends.
  bool advance_to_live_section() {
    while (round_ < spec_.repeat) {
      if (section_ < spec_.sections.size() &&
          pos_ < section_frames(spec_.sections[section_], spec_.sample_rate)) {
        return true;
      }
      pos_ = 0;
      if (++section_ >= spec_.sections.size()) {
        section_ = 0;
        ++round_;
        if (spec_.sections.empty()) return false;
      }
    }
    return false;
  }

  float sample(const Section& s, int64_t i, int64_t frames) {
    const int rate = spec_.sample_rate;
    switch (s.kind) {
      case Kind::kTone:
        return float(s.gain * fade(i, frames, rate) * sine(s.frequency, i, rate));
      case Kind::kChord: {
        // Root, major third, fifth (equal temperament); /3 keeps the peak <= gain.
        const double sum = sine(s.frequency, i, rate) +
                           sine(s.frequency * 1.2599210498948732, i, rate) +
                           sine(s.frequency * 1.4983070768766815, i, rate);
        return float(s.gain * fade(i, frames, rate) * sum / 3.0);
      }
      case Kind::kNoise:
        return float(s.gain) * noise_sample(rng_);
      case Kind::kClicks:
        return in_click(s.frequency, i, rate) ? float(s.gain) : 0.0f;
      case Kind::kSilence:
        break;
    }
    return 0.0f;
  }

  const FileSpec& spec_;
  std::mt19937_64 rng_;
  size_t section_ = 0;
  int round_ = 0;
  int64_t pos_ = 0;
};

int sf_format_of(const std::string& path, const std::string& name) {
  if (name == "wav") return SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  if (name == "wavf") return SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  if (name == "flac") return SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
  if (name == "ogg") return SF_FORMAT_OGG | SF_FORMAT_VORBIS;
  throw std::runtime_error(path + ": unknown format \"" + name + "\" (wav, wavf, flac or ogg)");
}

void check_spec(const std::string& path, const FileSpec& spec) {
  auto fail = [&](const std::string& why) { throw std::runtime_error(path + ": " + why); };
  if (spec.sample_rate <= 0) fail("sample rate must be > 0");
  if (spec.channels < 1 || spec.channels > kMaxWriteChannels) fail("channels must be 1..1024");
  if (spec.repeat < 1) fail("repeat must be >= 1");
  for (const Section& s : spec.sections) {
    if (!(s.seconds >= 0) || !std::isfinite(s.seconds)) fail("section seconds must be >= 0");
    if (!(s.frequency > 0) || !std::isfinite(s.frequency)) fail("section frequency must be > 0");
    if (!(s.gain >= 0 && s.gain <= 1)) fail("section gain must be in [0, 1]");
  }
}

// Opens for writing and turns off what would break this file's promises:
// the PEAK chunk (it holds time(NULL), so two runs would differ) and PCM
// wrap-around (a full-scale float would become -32768 without clipping).
SndFilePtr open_for_write(const std::string& path, const FileSpec& spec) {
  SF_INFO sfi{};
  sfi.samplerate = spec.sample_rate;
  sfi.channels = spec.channels;
  sfi.format = sf_format_of(path, spec.format);
  if (!sf_format_check(&sfi)) {
    throw std::runtime_error(path + ": libsndfile cannot write " + spec.format + " at " +
                             std::to_string(spec.sample_rate) + " Hz, " +
                             std::to_string(spec.channels) + " channels");
  }
  SndFilePtr file(sf_open(path.c_str(), SFM_WRITE, &sfi));
  if (!file) throw std::runtime_error(path + ": " + sf_strerror(nullptr));
  sf_command(file.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);
  sf_command(file.get(), SFC_SET_ADD_PEAK_CHUNK, nullptr, SF_FALSE);
  return file;
}

void write_frames(const std::string& path, SNDFILE* file, const float* frames, size_t n) {
  if (sf_writef_float(file, frames, sf_count_t(n)) != sf_count_t(n)) {
    throw std::runtime_error(path + ": write failed (" + sf_strerror(file) + ")");
  }
}

void write_timeline(const std::string& path, SNDFILE* file, const FileSpec& spec) {
  Timeline timeline(spec);
  const size_t channels = size_t(spec.channels);
  std::vector<float> mono(kBlockFrames);
  std::vector<float> frames(kBlockFrames * channels);
  while (const size_t n = timeline.fill(mono.data(), kBlockFrames)) {
    for (size_t f = 0; f < n; ++f) {
      for (size_t c = 0; c < channels; ++c) frames[f * channels + c] = mono[f];
    }
    write_frames(path, file, frames.data(), n);
  }
}

// Frequency a kind gets when the item has no "@Hz": A4, A3 (a low chord root)
// and 8 clicks per second; noise and silence ignore it.
double default_frequency(Kind kind) {
  switch (kind) {
    case Kind::kChord: return 220;
    case Kind::kClicks: return 8;
    default: return 440;
  }
}

bool parse_kind(const std::string& name, Kind& kind) {
  static const std::pair<const char*, Kind> kKinds[] = {
      {"tone", Kind::kTone},       {"chord", Kind::kChord},   {"noise", Kind::kNoise},
      {"silence", Kind::kSilence}, {"clicks", Kind::kClicks},
  };
  for (const auto& [text, k] : kKinds) {
    if (name == text) {
      kind = k;
      return true;
    }
  }
  return false;
}

// A positive, finite number filling all of `text` (from_chars: no locale).
bool parse_positive(const std::string& text, double& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && std::isfinite(value) && value > 0;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

Section parse_item(const std::string& item) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("section \"" + item + "\": " + why +
                                " (expected kind:seconds[@Hz], e.g. chord:3@220)");
  };
  const auto colon = item.find(':');
  if (colon == std::string::npos) fail("missing ':seconds'");
  Section s;
  if (!parse_kind(item.substr(0, colon), s.kind)) {
    fail("unknown kind \"" + item.substr(0, colon) + "\" (tone, chord, noise, silence, clicks)");
  }
  const auto at = item.find('@', colon);
  const std::string seconds = item.substr(colon + 1, at == std::string::npos ? at : at - colon - 1);
  if (!parse_positive(seconds, s.seconds)) fail("seconds must be a positive number");
  s.frequency = default_frequency(s.kind);
  if (at != std::string::npos && !parse_positive(item.substr(at + 1), s.frequency)) {
    fail("frequency must be a positive number of Hz");
  }
  return s;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error(path + ": cannot write");
}

FileSpec short_tone(int rate, int channels, const std::string& format) {
  FileSpec spec;
  spec.sample_rate = rate;
  spec.channels = channels;
  spec.format = format;
  spec.sections = {{Kind::kTone, 1.0, 440, 0.5}};
  return spec;
}

// A 1 s float WAV at 8 kHz with one bad sample exactly in the middle (frame
// 4000), the position AudioStream must report.
void write_with_bad_sample(const std::string& path, float bad) {
  const FileSpec spec = short_tone(8000, 1, "wavf");
  std::vector<float> samples(size_t(spec.sample_rate));
  Timeline(spec).fill(samples.data(), samples.size());
  samples[samples.size() / 2] = bad;
  SndFilePtr file = open_for_write(path, spec);
  sf_command(file.get(), SFC_SET_CLIPPING, nullptr, SF_FALSE);  // the Inf must survive as is
  write_frames(path, file.get(), samples.data(), samples.size());
}

// Overwrites `bytes` at `offset`, e.g. a header field.
void patch(const std::string& path, off_t offset, const void* bytes, size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::pwrite(fd, bytes, n, offset) == ssize_t(n);
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error(path + ": cannot patch header");
}

// Cuts half of the data chunk off the end, leaving the header's size alone.
// `spec` is PCM16 WAV: 2 bytes a sample, data chunk last.
void cut_data_in_half(const std::string& path, const FileSpec& spec) {
  struct stat st {};
  const int64_t frames = std::llround(duration_seconds(spec) * spec.sample_rate);
  const int64_t data_bytes = frames * 2 * spec.channels;
  if (::stat(path.c_str(), &st) != 0 ||
      ::truncate(path.c_str(), st.st_size - data_bytes / 2) != 0) {
    throw std::runtime_error(path + ": cannot truncate");
  }
}

}  // namespace

void write_audio(const std::string& path, const FileSpec& spec) {
  check_spec(path, spec);
  SndFilePtr file = open_for_write(path, spec);
  // From here on the file is ours: never leave a half-written one behind.
  try {
    write_timeline(path, file.get(), spec);
    if (sf_close(file.release()) != 0) throw std::runtime_error(path + ": close failed");
  } catch (...) {
    file.reset();
    std::remove(path.c_str());
    throw;
  }
}

void write_samples(const std::string& path, const std::vector<float>& mono, int sample_rate) {
  FileSpec spec;
  spec.sample_rate = sample_rate;
  check_spec(path, spec);
  SndFilePtr file = open_for_write(path, spec);
  try {
    write_frames(path, file.get(), mono.data(), mono.size());
    if (sf_close(file.release()) != 0) throw std::runtime_error(path + ": close failed");
  } catch (...) {
    file.reset();
    std::remove(path.c_str());
    throw;
  }
}

double duration_seconds(const FileSpec& spec) {
  int64_t frames = 0;
  for (const Section& s : spec.sections) frames += section_frames(s, spec.sample_rate);
  return spec.sample_rate > 0 ? double(frames) * spec.repeat / spec.sample_rate : 0.0;
}

FileSpec demo_spec() {
  FileSpec spec;
  spec.sample_rate = 16000;
  spec.channels = 1;
  spec.sections = {
      {Kind::kTone, 4, 440, 0.5},   {Kind::kNoise, 4, 440, 0.3},  {Kind::kSilence, 3, 440, 0},
      {Kind::kChord, 5, 220, 0.5},  {Kind::kClicks, 4, 8, 0.8},   {Kind::kTone, 3, 880, 0.5},
      {Kind::kNoise, 3, 440, 0.3},  {Kind::kSilence, 4, 440, 0},
  };
  return spec;
}

std::vector<Section> parse_sections(const std::string& text) {
  std::vector<Section> sections;
  size_t begin = 0;
  for (;;) {
    const size_t comma = text.find(',', begin);
    const size_t len = comma == std::string::npos ? comma : comma - begin;
    const std::string item = trim(text.substr(begin, len));
    if (item.empty()) {
      throw std::invalid_argument("section " + std::to_string(sections.size() + 1) + " of \"" +
                                  text + "\" is empty");
    }
    sections.push_back(parse_item(item));
    if (comma == std::string::npos) return sections;
    begin = comma + 1;
  }
}

std::vector<std::string> write_damaged_files(const std::string& dir) {
  auto at = [&](const char* name) { return dir + "/" + name; };
  std::vector<std::string> paths;

  paths.push_back(at("not_audio.wav"));
  write_text(paths.back(), "This is a text file, not audio.\n");

  paths.push_back(at("empty.wav"));
  FileSpec empty = short_tone(8000, 1, "wav");
  empty.sections.clear();
  write_audio(paths.back(), empty);

  paths.push_back(at("truncated.wav"));
  const FileSpec tone = short_tone(8000, 1, "wav");
  write_audio(paths.back(), tone);
  cut_data_in_half(paths.back(), tone);

  paths.push_back(at("zero_rate.wav"));
  write_audio(paths.back(), tone);
  const unsigned char zero[4] = {0, 0, 0, 0};
  patch(paths.back(), 24, zero, sizeof(zero));  // RIFF(12) + "fmt "(8) + tag, channels(4)

  paths.push_back(at("many_channels.wav"));
  FileSpec many = short_tone(8000, 40, "wav");
  many.sections[0].seconds = 0.1;
  write_audio(paths.back(), many);

  paths.push_back(at("nan.wav"));
  write_with_bad_sample(paths.back(), std::nanf(""));
  paths.push_back(at("inf.wav"));
  write_with_bad_sample(paths.back(), INFINITY);

  paths.push_back(at("zero_bytes.wav"));
  write_text(paths.back(), "");
  return paths;
}

FileSpec demo_of_seconds(double seconds, int sample_rate) {
  FileSpec spec = demo_spec();
  spec.sample_rate = sample_rate;
  spec.repeat = std::max(1, static_cast<int>(seconds / duration_seconds(spec) + 0.5));
  return spec;
}

}  // namespace corepool::synth
