// Bytes on the wire for HttpServer: serialises an HttpResponse (status line,
// Content-Length, Connection) and builds the server's own JSON error answers.
// Called on the loop thread by http_connection.cc; pure functions, no state.
#pragma once

#include <string>
#include <string_view>

#include "supervisor/http/http_types.h"

namespace corepool::http {

struct WireOptions {
  bool keep_alive = true;  // false adds "Connection: close"
  bool http10 = false;     // an HTTP/1.0 keep-alive must be confirmed explicitly
  bool head = false;       // HEAD: headers only, Content-Length of the would-be body
  bool open_body = false;  // no Content-Length: the body runs until the connection closes (an event stream)
};

std::string serialize_response(const HttpResponse& response, const WireOptions& wire);

// {"error": message} with the given status; extra headers (Retry-After) added by callers.
HttpResponse error_response(int status, std::string_view message);

// True when the handler asked for the connection to close after this response.
bool asks_to_close(const HttpResponse& response);

}  // namespace corepool::http
