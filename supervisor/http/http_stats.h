// HttpServer's counters: written by the loop thread, read by any thread through
// HttpServer::stats() (the metrics endpoint). One mutex; every update is a few
// integer adds, far below the cost of the syscalls they count.
#pragma once

#include <cstdint>
#include <mutex>

#include "supervisor/http/http_types.h"

namespace corepool::http {

class StatsBoard {
 public:
  void connection_opened() { update([](HttpStats& s) { ++s.connections_accepted, ++s.connections_open; }); }
  void connection_closed() { update([](HttpStats& s) { --s.connections_open; }); }
  void connection_rejected() { update([](HttpStats& s) { ++s.connections_rejected; }); }
  void request() { update([](HttpStats& s) { ++s.requests; }); }
  void response(int status) { update([status](HttpStats& s) { ++s.responses_by_status[status]; }); }
  void received(std::uint64_t n) { update([n](HttpStats& s) { s.bytes_received += n; }); }
  void sent(std::uint64_t n) { update([n](HttpStats& s) { s.bytes_sent += n; }); }

  HttpStats snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  template <typename F>
  void update(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(stats_);
  }

  mutable std::mutex mu_;
  HttpStats stats_;
};

}  // namespace corepool::http
