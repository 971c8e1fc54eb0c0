// What the default spdlog logger printed while a piece of code ran: the
// tests that check a log line (the engine plan, a WARN) read it from here.
#pragma once

#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace corepool::testing {

template <typename Fn>
std::string captured_log(Fn run) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out)));
  run();
  spdlog::set_default_logger(previous);
  return out.str();
}

}  // namespace corepool::testing
