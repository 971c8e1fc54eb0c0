// triton::http_status: how each of Triton's error kinds is answered over HTTP.
// Called by the HTTP routes (serve_routes.cc); gRPC maps Code by name instead.
#include "supervisor/triton/triton_service.h"

namespace corepool::triton {

int http_status(Code code) {
  switch (code) {
    case Code::kOk: return 200;
    case Code::kInvalidArgument: return 400;
    case Code::kNotFound: return 404;
    case Code::kUnavailable: return 503;
    case Code::kResourceExhausted: return 503;
    case Code::kDeadlineExceeded: return 504;
    case Code::kCancelled: return 499;  // nginx's "client closed request": never sent, only counted
    case Code::kAlreadyExists: return 400;
    case Code::kPermissionDenied: return 403;
    case Code::kUnauthenticated: return 401;
    case Code::kInternal: return 500;
  }
  return 500;
}

}  // namespace corepool::triton
