// Doors: the token check and where the token comes from. The comparison is
// constant-time over the token's bytes; the "Bearer " scheme is matched
// case-insensitively as RFC 7235 says, and any other header (Basic, empty,
// a bare token) is the same 401 as no header.
#include "supervisor/triton/doors.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "config/config_error.h"

namespace corepool::triton {
namespace {

constexpr std::string_view kScheme = "bearer ";

// The token after "Bearer " (any case, extra spaces allowed), or nullopt.
std::optional<std::string_view> bearer_token(std::string_view header) {
  if (header.size() < kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
  }
  header.remove_prefix(kScheme.size());
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t')) header.remove_suffix(1);
  return header;
}

std::string read_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw ConfigError("serve.api_token_file: cannot read " + path + ": " + std::strerror(errno));
  }
  if (st.st_mode & S_IROTH) {
    throw ConfigError("serve.api_token_file: " + path +
                      " is readable by every user (mode " + std::to_string((st.st_mode >> 6) & 7) +
                      std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) +
                      "); make it readable by the service only: chmod 600 " + path);
  }
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) throw ConfigError("serve.api_token_file: cannot read " + path);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
  if (line.empty()) throw ConfigError("serve.api_token_file: " + path + " holds no token on its first line");
  return line;
}

}  // namespace

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  volatile unsigned char diff = 0;  // volatile: the loop must not stop at the first difference
  for (size_t i = 0; i < a.size(); ++i) diff = diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
  return diff == 0;
}

std::string resolve_api_token(const Config& config) {
  if (!config.api_token.empty() && !config.api_token_file.empty()) {
    throw ConfigError("serve.api_token and serve.api_token_file are both set: keep one");
  }
  if (!config.api_token_file.empty()) return read_token_file(config.api_token_file);
  return config.api_token;
}

Status Doors::check(std::optional<std::string_view> authorization) {
  if (token_.empty()) {
    if (allow_model_control_) return {};
    ++forbidden_;
    return {Code::kPermissionDenied,
            "model control is off: set serve.api_token (then send \"Authorization: Bearer TOKEN\") or "
            "serve.allow_model_control = true"};
  }
  const auto given = authorization ? bearer_token(*authorization) : std::nullopt;
  if (given && constant_time_equal(*given, token_)) return {};
  ++unauthenticated_;
  return {Code::kUnauthenticated, authorization ? "wrong token: send \"Authorization: Bearer TOKEN\" with serve's token"
                                                : "missing token: send \"Authorization: Bearer TOKEN\""};
}

}  // namespace corepool::triton
