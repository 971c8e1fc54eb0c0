#include "supervisor/serve/reload_check.h"

#include <spdlog/spdlog.h>

namespace corepool {

// Settings that belong to the process, not to a generation: a reload cannot
// change them. The mode is refused outright: a process that has run LibTorch
// ops (thread mode) must not fork workers, and the reverse would make every
// later reload unsafe.
void check_reloadable(const Config& now, const Config& next) {
  if (next.mode != now.mode) {
    throw ConfigError("engine.mode cannot change on reload (" + now.mode + " -> " + next.mode + "): restart the service");
  }
  auto warn = [](const char* key, bool changed) {
    if (changed) spdlog::warn("reload: {} changed; it takes effect at the next restart", key);
  };
  warn("serve.listen", next.listen != now.listen);
  warn("serve.unix_socket", next.unix_socket != now.unix_socket);
  warn("serve.unix_socket_group", next.unix_socket_group != now.unix_socket_group);
  warn("serve.grpc_listen / grpc_max_message_mb",
       next.grpc_listen != now.grpc_listen || next.grpc_max_message_mb != now.grpc_max_message_mb);
  warn("serve.max_connections / timeouts / body limit",
       next.max_connections != now.max_connections || next.idle_timeout_s != now.idle_timeout_s ||
           next.header_timeout_s != now.header_timeout_s || next.body_timeout_s != now.body_timeout_s ||
           next.max_body_mb != now.max_body_mb);
  warn("serve.audio_threads / max_audio_requests",
       next.audio_threads != now.audio_threads || next.max_audio_requests != now.max_audio_requests);
  warn("engine.intra_op_threads / inter_op_threads",
       next.intra_op_threads != now.intra_op_threads || next.inter_op_threads != now.inter_op_threads);
}

}  // namespace corepool
