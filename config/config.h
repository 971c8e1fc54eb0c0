// Service and batch settings: the one TOML file, loaded with toml++ and
// overridden by CLI flags. Each member is a row of config/config_keys.cc's table
// (its key, range, flag, reload and doc); its initializer here is the default.
// Called by supervisor/main.cc at startup; a Config is a plain value, copy freely.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "config/config_error.h"
#include "config/source_config.h"

namespace corepool {

struct Config {
  // [model]
  std::string model_dir = "models/default";  // directory holding model.pt + model.toml
  // [engine]
  std::string mode = "thread";   // "thread" | "process"
  int workers = 0;               // engine threads / worker processes; 0 = usable cores
  int intra_op_threads = 1;      // at::set_num_threads; 1 disables the global intra-op pool, 0 = LibTorch's default
  int inter_op_threads = 1;      // at::set_num_interop_threads; 0 = LibTorch's default
  int max_batch = 0;             // segments per forward(); 0 = measured at start (worker/calibrate.h)
  std::string optimize = "onednn";  // "none" | "onednn" | "onednn-direct" | "bf16" (worker/optimize/optimize.h)
  std::string kernels = "auto";     // auto | onednn | corepool | portable | torch (worker/kernels/kernel_path.h)
  std::string plan_cache;           // plan cache directory; "" = the default (worker/plan_cache.h), "off" = none
  bool replan = false;              // measure the plan anew and replace the cached one
  int queue_depth = 0;           // segments in flight; 0 = 4 * workers * max_batch
  bool pin_threads = true;       // pin engine thread / worker i to the i-th usable cpu
  int max_batch_delay_us = 0;    // process mode: wait this long for a fuller batch (0 = never)
  int hang_timeout_ms = 10000;   // process mode: a worker silent this long is killed and replaced
  int max_requests = 0;          // process mode: recycle a worker after this many segments; 0 = never
  int max_rss_mb = 0;            // process mode: recycle a worker whose RSS exceeds this; 0 = never
  std::string allocator = "jemalloc";  // "jemalloc" | "system" (glibc malloc); see supervisor/pool/allocator.h
  // [batch]
  std::string out_dir = "corepool-out";  // where batch writes one .jsonl per input
  bool force = false;                    // redo files whose result is already complete
  // [serve]
  std::string listen = "127.0.0.1:8080";  // TCP "host:port" ("[v6]:port"); "" = no TCP listener
  std::string unix_socket;                // Unix socket path (mode 0660); "" = none
  std::string unix_socket_group;          // group owning the socket (its clients); "" = ours
  int max_body_mb = 64;                   // a request body over this is answered 413
  int max_connections = 4096;             // more are answered 503 and closed
  int idle_timeout_s = 60;                // keep-alive connection idle this long is closed
  int header_timeout_s = 10;              // headers must arrive within this (else 408)
  int body_timeout_s = 60;                // the body within this after the headers (else 408)
  int drain_timeout_s = 20;               // SIGTERM: in-flight requests get this long
  int max_audio_requests = 64;            // /v1/audio:tag requests queued or decoding; more get 503
  int audio_threads = 1;                  // threads decoding audio request bodies
  int retry_after_s = 1;                  // Retry-After of a 503 for a full queue
  int request_timeout_s = 60;             // an infer request unanswered this long gets 504; 0 = no deadline
  std::string grpc_listen = "127.0.0.1:8001";  // gRPC (KServe v2 / Triton) "host:port"; "" = no gRPC
  int grpc_max_message_mb = 64;           // a gRPC message over this is refused (RESOURCE_EXHAUSTED)
  bool allow_client_shm = false;          // Triton's system shared memory extension (off, as Triton ships it)
  std::string client_shm_group;           // regions owned by this group are accepted too; "" = our uid only
  std::string api_token;                  // model control needs "Authorization: Bearer" this; "" = none
  std::string api_token_file;             // ... or the token read from this file (not world-readable)
  bool allow_model_control = false;       // no token: repository load/unload and shm registration open anyway
  int lame_duck_s = 0;                    // SIGTERM: readiness 503 while still serving this long, then drain
  int max_streams = 16;                   // WebSocket audio streams open at once; one more is answered 503
  int stream_idle_s = 10;                 // a stream with no audio this long is flushed and closed
  int grpc_stream_backlog = 4096;         // ModelStreamInfer responses waiting for a client; more events are dropped
  // [log]
  std::string log_level = "info";  // trace | debug | info | warn | error | off
  // [[source]] tables: audio serve pulls itself (config/source_config.h)
  std::vector<SourceConfig> sources;
};

// "127.0.0.1:8080" / "[::1]:8080" -> host and port. Throws ConfigError naming
// `what` (e.g. "serve.listen") when the text is not host:port with 0 <= port <= 65535.
struct HostPort {
  std::string host;
  int port = 0;
};
HostPort parse_host_port(const std::string& text, const std::string& what);

// Reads `path` over the defaults. Throws ConfigError (file:line: key: reason) on
// a syntax error, an unknown key, a wrong type or an out-of-range value.
Config load_config(const std::string& path);

// The [engine] keys a reload may change, set from `toml_text` (a TOML
// document with one [engine] table) over `config`, with load_config's checks.
// `name` stands for the text in messages. Throws ConfigError on a bad value, an
// unknown key, or a key a reload cannot change (engine.mode, the LibTorch
// thread counts, engine.allocator: they belong to the process).
void override_engine_keys(Config& config, const std::string& name, const std::string& toml_text);

// Keys that only one mode can honour, checked once the CLI flags are applied
// (they may change the mode). Throws ConfigError: thread mode has no worker
// process to recycle, so engine.max_requests / engine.max_rss_mb are refused
// there rather than silently ignored.
void check_mode_keys(const Config& config);

}  // namespace corepool
