// The doors of `corepool serve`: which clients may use the endpoints that
// change what the service runs or reads (repository load/unload, client
// shared-memory registration). Both wires ask the same Doors (serve_routes.cc
// with the Authorization header, grpc_service.cc with the "authorization"
// metadata), so HTTP and gRPC give the same answer. Made once at start by
// ServeProcess from serve.api_token / api_token_file / allow_model_control;
// thread-safe, lives as long as the servers that hold a reference.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"
#include "supervisor/triton/triton_service.h"

namespace corepool::triton {

// Equal lengths and bytes, in a time that depends on the lengths only: a
// client timing the 401s learns nothing about how much of its guess was right.
bool constant_time_equal(std::string_view a, std::string_view b);

// The token the config asks for: serve.api_token, or the first line of
// serve.api_token_file; "" = none. Throws ConfigError naming the key and the
// file when both are set, the file cannot be read, is readable by others
// (mode & 0004) or holds no token.
std::string resolve_api_token(const Config& config);

class Doors {
 public:
  Doors(std::string token, bool allow_model_control)
      : token_(std::move(token)), allow_model_control_(allow_model_control) {}

  // `authorization`: the request's Authorization header (HTTP) or metadata
  // (gRPC), nullopt when it has none. kOk: come in. kUnauthenticated: a token
  // is set and this is not "Bearer <it>". kPermissionDenied: no token and
  // model control is off. Refusals are counted.
  Status check(std::optional<std::string_view> authorization);

  bool has_token() const { return !token_.empty(); }
  uint64_t refused_unauthenticated() const { return unauthenticated_.load(); }
  uint64_t refused_forbidden() const { return forbidden_.load(); }

 private:
  const std::string token_;
  const bool allow_model_control_;
  std::atomic<uint64_t> unauthenticated_{0};
  std::atomic<uint64_t> forbidden_{0};
};

}  // namespace corepool::triton
