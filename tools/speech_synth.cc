// espeak-ng as a child process: argv built from the Voice (no shell), WAV on a
// pipe, decoded with the pipeline's AudioStream from memory. The child's stderr
// goes to /dev/null; a failure is reported by its exit status and the voice.
#include "tools/speech_synth.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "audio/audio_stream.h"

extern char** environ;

namespace corepool::synth {
namespace {

std::string voice_name(const Voice& v) { return v.variant.empty() ? v.language : v.language + "+" + v.variant; }

std::vector<std::string> espeak_argv(const std::string& text, const Voice& v) {
  return {"espeak-ng", "--stdout", "-v", voice_name(v), "-s", std::to_string(v.words_per_minute),
          "-p", std::to_string(v.pitch), "-g", std::to_string(v.word_gap_10ms), "--", text};
}

// Runs argv with stdout on a pipe; returns everything it wrote and its wait status.
std::string run_capture(const std::vector<std::string>& args, int& status) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error("cannot start espeak-ng (" + std::string(std::strerror(rc)) +
                             "); install it: apt-get install espeak-ng");
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) out.append(buf, size_t(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return out;
}

}  // namespace

std::vector<float> speak(const std::string& text, const Voice& voice, int rate) {
  int status = 0;
  auto wav = std::make_shared<const std::string>(run_capture(espeak_argv(text, voice), status));
  const std::string who = "espeak-ng -v " + voice_name(voice);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(who + " failed (status " + std::to_string(status) + ")");
  }
  if (wav->size() <= 44) throw std::runtime_error(who + " wrote no audio");
  // espeak-ng streams its WAV and leaves the header's length at "unknown";
  // patch the RIFF and data sizes so the decoder sees a complete file.
  std::string fixed = *wav;
  auto put32 = [&](size_t at, uint32_t v) { for (int i = 0; i < 4; ++i) fixed[at + i] = char((v >> (8 * i)) & 0xff); };
  if (fixed.compare(0, 4, "RIFF") == 0 && fixed.compare(36, 4, "data") == 0) {
    put32(4, uint32_t(fixed.size() - 8));
    put32(40, uint32_t(fixed.size() - 44));
  }
  AudioStream stream(who, std::make_shared<const std::string>(std::move(fixed)), rate);
  std::vector<float> samples;
  while (stream.read(samples)) {}
  return samples;
}

}  // namespace corepool::synth
