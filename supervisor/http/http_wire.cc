// Serialisation of HttpServer responses; see http_wire.h. Handler-supplied
// headers are checked here because this is the last point before the socket:
// a CR or LF in a name or value would let a handler split the response.
#include "supervisor/http/http_wire.h"

#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

namespace corepool::http {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool is_safe_field(std::string_view s) { return s.find_first_of("\r\n") == std::string_view::npos; }

// Fields the server owns: a handler's copy would contradict the framing.
bool is_framing_field(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") ||
         iequals(name, "connection");
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

}  // namespace

std::string serialize_response(const HttpResponse& response, const WireOptions& wire) {
  const auto reason = boost::beast::http::obsolete_reason(
      static_cast<boost::beast::http::status>(response.status));
  std::string out;
  out.reserve(128 + response.body.size());
  out.append("HTTP/1.1 ").append(std::to_string(response.status)).append(" ");
  out.append(reason.data(), reason.size()).append("\r\n");
  if (!response.content_type.empty() && is_safe_field(response.content_type))
    append_field(out, "Content-Type", response.content_type);
  for (const auto& [name, value] : response.headers) {
    if (is_framing_field(name)) continue;
    if (name.empty() || !is_safe_field(name) || !is_safe_field(value)) {
      spdlog::warn("http: dropping response header with CR/LF or empty name");
      continue;
    }
    append_field(out, name, value);
  }
  // RFC 9110 8.6: a 1xx or 204 answer has no body and must not announce one.
  const bool bodiless = response.status < 200 || response.status == 204;
  if (!bodiless && !wire.open_body) append_field(out, "Content-Length", std::to_string(response.body.size()));
  if (response.status == 101) append_field(out, "Connection", "Upgrade");  // RFC 9110 15.2.2: switching protocols
  else if (!wire.keep_alive) append_field(out, "Connection", "close");
  else if (wire.http10) append_field(out, "Connection", "keep-alive");
  out.append("\r\n");
  if (!wire.head && !bodiless) out.append(response.body);
  return out;
}

HttpResponse error_response(int status, std::string_view message) {
  HttpResponse response;
  response.status = status;
  response.body = nlohmann::json{{"error", message}}.dump();
  return response;
}

bool asks_to_close(const HttpResponse& response) {
  for (const auto& [name, value] : response.headers)
    if (iequals(name, "connection") && iequals(value, "close")) return true;
  return false;
}

}  // namespace corepool::http
