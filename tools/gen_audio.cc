// corepool-gen-audio: writes deterministic test/demo audio (see audio_synth.h)
// or the set of damaged files the validation tests use. Used by `make run`,
// the benchmarks and people reproducing a bug. Exit codes: 0 written,
// 1 the file could not be written, 2 bad arguments.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "tools/audio_synth.h"
#include "tools/sound_classes.h"

namespace {

constexpr int kExitWriteFailed = 1;
constexpr int kExitBadArguments = 2;

struct Options {
  std::string out;
  std::string damaged_dir;
  std::string sections;
  bool demo = false;
  corepool::synth::FileSpec spec;
};

void add_options(CLI::App& app, Options& o) {
  auto* out = app.add_option("--out", o.out, "File to write");
  app.add_option("--rate", o.spec.sample_rate, "Sample rate in Hz")
      ->check(CLI::Range(1000, 768000))->capture_default_str();
  app.add_option("--channels", o.spec.channels, "Channels (all carry the same signal)")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--format", o.spec.format, "wav (PCM16) | wavf (float32) | flac | ogg")
      ->check(CLI::IsMember({"wav", "wavf", "flac", "ogg"}))->capture_default_str();
  app.add_option("--seed", o.spec.seed, "Noise seed")->capture_default_str();
  auto* sections = app.add_option("--sections", o.sections,
                                  "Timeline, e.g. tone:2,noise:1.5,silence:1,chord:3@220");
  auto* demo = app.add_flag("--demo", o.demo,
                            "The 28 s tagger demo: speech, music, noise, silence (16 kHz WAV; needs espeak-ng)");
  app.add_option("--repeat", o.spec.repeat, "Play the timeline N times")
      ->check(CLI::PositiveNumber)->capture_default_str();
  auto* damaged = app.add_option("--damaged", o.damaged_dir,
                                 "Write the damaged validation files into this directory");
  sections->excludes(demo);
  damaged->excludes(out)->excludes(sections)->excludes(demo);
}

int bad_arguments(const std::string& why) {
  std::fprintf(stderr, "corepool-gen-audio: %s\n", why.c_str());
  return kExitBadArguments;
}

// CLI11 messages are one line in practice; make sure of it.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

int write_damaged(const std::string& dir) {
  for (const std::string& path : corepool::synth::write_damaged_files(dir)) {
    std::printf("%s\n", path.c_str());
  }
  return 0;
}

// The `make run` demo, from the tagger's held-out generators; prints the truth.
int write_demo(const Options& o) {
  constexpr int kRate = 16000;
  corepool::synth::write_samples(o.out, corepool::synth::demo_samples(kRate), kRate);
  std::printf("wrote %s:", o.out.c_str());
  for (const auto& p : corepool::synth::demo_parts()) {
    std::printf(" %s %.0f-%.0f s", corepool::synth::label_name(p.label), p.start, p.end);
  }
  std::printf("\n");
  return 0;
}

// The section timeline given by --sections, else the test timeline (demo_spec).
int write_file(Options& o) {
  o.spec.sections = o.sections.empty() ? corepool::synth::demo_spec().sections
                                       : corepool::synth::parse_sections(o.sections);
  corepool::synth::write_audio(o.out, o.spec);
  std::printf("wrote %s (%.2f s, %d Hz, %d ch, %s)\n", o.out.c_str(),
              corepool::synth::duration_seconds(o.spec), o.spec.sample_rate, o.spec.channels,
              o.spec.format.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes deterministic test audio: tones, chords, noise, silence, clicks.",
               "corepool-gen-audio"};
  Options o;
  add_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return bad_arguments(one_line(e.what()));
  }
  if (o.out.empty() && o.damaged_dir.empty()) {
    return bad_arguments("--out FILE or --damaged DIR is required");
  }

  try {
    if (!o.damaged_dir.empty()) return write_damaged(o.damaged_dir);
    return o.demo ? write_demo(o) : write_file(o);
  } catch (const std::invalid_argument& e) {  // parse_sections
    return bad_arguments(e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corepool-gen-audio: %s\n", e.what());
    return kExitWriteFailed;
  }
}
