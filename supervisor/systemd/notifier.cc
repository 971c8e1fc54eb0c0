// sd_notify(3) wrapper for `corepool serve`; see notifier.h.
#include "supervisor/systemd/notifier.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

namespace corepool {
namespace {

// A status line with a newline would smuggle extra assignments into the
// datagram ("x\nREADY=1"); systemd's protocol is one assignment per line.
std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

std::uint64_t monotonic_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

}  // namespace

Notifier::Notifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
}

void Notifier::ready(const std::string& status) { send("READY=1\nSTATUS=" + one_line(status)); }

void Notifier::status(const std::string& status) { send("STATUS=" + one_line(status)); }

void Notifier::reloading() { send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_usec())); }

void Notifier::stopping() { send("STOPPING=1"); }

void Notifier::watchdog() { send("WATCHDOG=1"); }

std::optional<std::chrono::microseconds> Notifier::watchdog_interval() const {
  if (!enabled_) return std::nullopt;
  std::uint64_t usec = 0;
  // 0: keep WATCHDOG_USEC/WATCHDOG_PID set; another thread may ask again.
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds(usec);
}

void Notifier::send(const std::string& message) {
  if (!enabled_) return;
  // unset_environment = 0: sd_notify reads NOTIFY_SOCKET again on every call.
  const int r = sd_notify(0, message.c_str());
  if (r > 0) return;
  // r == 0: NOTIFY_SOCKET vanished since construction (someone unset it).
  if (!failure_logged_.exchange(true)) {
    const char* socket = std::getenv("NOTIFY_SOCKET");
    spdlog::warn("sd_notify({}) to {} failed: {} (further failures are not logged)",
                 message.substr(0, message.find('\n')), socket ? socket : "(NOTIFY_SOCKET unset)",
                 r < 0 ? std::strerror(-r) : "NOTIFY_SOCKET was unset");
  }
}

}  // namespace corepool
