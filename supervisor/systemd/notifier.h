// sd_notify(3) for `corepool serve`: tells systemd (Type=notify) that the
// service is ready, reloading or stopping, its status line, and pets the
// watchdog. Owned by the supervisor process only: systemd accepts messages from
// the main pid (NotifyAccess=main), so forked workers must not use one.
// Every call is a no-op when NOTIFY_SOCKET is unset (run outside systemd).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

namespace corepool {

// Thread-safe: each message is one datagram on a fresh socket (sd_notify), and
// the only shared state is the log-once flag. Never throws; a failed send is
// logged once (warn) and the service keeps running, since systemd's view of
// it is then at worst stale (or the watchdog fires, which is the point).
class Notifier {
 public:
  // Reads NOTIFY_SOCKET once. The environment is left as it is: the service
  // sends many messages over its lifetime, and sd_notify reads it on every call.
  Notifier();

  bool enabled() const { return enabled_; }

  void ready(const std::string& status);   // "READY=1\nSTATUS=<status>"
  void status(const std::string& status);  // "STATUS=<status>"
  // "RELOADING=1\nMONOTONIC_USEC=<now>": start of a reload (Type=notify-reload
  // contract, systemd >= 253; older managers ignore the fields). Send ready()
  // when the reload is done.
  void reloading();
  void stopping();  // "STOPPING=1": draining in-flight work after SIGTERM
  void watchdog();  // "WATCHDOG=1": send every watchdog_interval() / 2

  // WATCHDOG_USEC when systemd watches this very process (WATCHDOG_PID matches
  // or is unset); nullopt when disabled or not run by systemd.
  std::optional<std::chrono::microseconds> watchdog_interval() const;

 private:
  void send(const std::string& message);

  bool enabled_ = false;
  std::atomic<bool> failure_logged_{false};
};

}  // namespace corepool
