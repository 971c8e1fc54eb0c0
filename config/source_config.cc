// read_sources(): the [[source]] tables (see source_config.h). Every check
// names the file, the line, the table's index and the source's name.
#include "config/source_config.h"

#include <algorithm>
#include <stdexcept>

#include "config/toml_reader.h"

namespace corepool {
namespace {

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::vector<std::string> read_event_texts(TomlReader& reader, const std::string& key) {
  if (reader.is_string(key)) return {reader.get_string(key, "")};
  return reader.get_string_array(key, {});
}

SourceConfig read_one(TomlReader& reader, size_t i) {
  const std::string at = "source[" + std::to_string(i) + "]";
  SourceConfig s;
  s.file = reader.file();
  s.line = reader.line(at);
  s.index = static_cast<int>(i);
  reader.require(at + ".name");
  s.name = reader.get_string(at + ".name", "");
  if (!valid_name(s.name)) {
    reader.fail(at + ".name", "\"" + s.name + "\" is not a source name: 1 to 64 of A-Z a-z 0-9 _ -");
  }
  const auto fail = [&](const std::string& key, const std::string& reason) {
    reader.fail(at + "." + key, "source \"" + s.name + "\": " + reason);
  };
  if (!reader.has(at + ".url")) fail("url", "required key is missing (a file path or an FFmpeg URL)");
  s.url = reader.get_string(at + ".url", "");
  if (s.url.empty()) fail("url", "must not be empty");
  if (std::any_of(s.url.begin(), s.url.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
    fail("url", "holds a control character");
  }
  if (s.url.rfind("pipe:", 0) == 0 &&
      (s.url.size() > 12 || s.url.find_first_not_of("0123456789", 5) != std::string::npos)) {
    fail("url", "\"" + s.url + "\": pipe: takes a descriptor number (pipe:0 is standard input)");
  }
  if (s.is_alsa()) {
    try {
      parse_alsa_url(s.url);
    } catch (const std::invalid_argument& e) {
      fail("url", e.what());
    }
  }
  s.model = reader.get_string(at + ".model", "");
  if (!reader.has(at + ".events")) {
    fail("events", "required key is missing: \"jsonl:PATH\" or \"webhook:http://HOST:PORT/PATH\", or a list of them");
  }
  const std::vector<std::string> texts = read_event_texts(reader, at + ".events");
  if (texts.empty()) fail("events", "the list is empty: name at least one sink");
  for (const std::string& text : texts) {
    try {
      s.events.push_back(parse_event_sink(text));
    } catch (const std::invalid_argument& e) {
      fail("events", e.what());
    }
  }
  s.backoff_s = reader.get_double(at + ".backoff_s", s.backoff_s, 0.01, 3600);
  s.backoff_max_s = reader.get_double(at + ".backoff_max_s", s.backoff_max_s, 0.01, 86400);
  if (s.backoff_max_s < s.backoff_s) {
    fail("backoff_max_s", "must be at least backoff_s (" + format_number(s.backoff_s) + "), got " +
                              format_number(s.backoff_max_s));
  }
  s.timeout_s = reader.get_double(at + ".timeout_s", s.timeout_s, 0.1, 3600);
  return s;
}

}  // namespace

std::string source_error(const SourceConfig& source, const std::string& key, const std::string& reason) {
  return source.file + ":" + std::to_string(source.line) + ": source[" + std::to_string(source.index) + "]." + key +
         ": source \"" + source.name + "\": " + reason;
}

bool SourceConfig::is_file() const {
  return url.find("://") == std::string::npos && url.rfind("pipe:", 0) != 0 && !is_alsa();
}

AlsaUrl parse_alsa_url(const std::string& url) {
  const auto bad = [&](const std::string& why) { return std::invalid_argument("\"" + url + "\": " + why); };
  AlsaUrl out;
  const size_t query = url.find('?');
  out.device = url.substr(5, query == std::string::npos ? std::string::npos : query - 5);
  if (out.device.empty() || out.device.rfind("//", 0) == 0) {
    throw bad("alsa: takes a capture device as arecord -D names it: alsa:default, alsa:hw:1,0, alsa:plughw:1,0");
  }
  std::string rest = query == std::string::npos ? "" : url.substr(query + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string pair = rest.substr(0, amp);
    rest = amp == std::string::npos ? "" : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    const std::string key = pair.substr(0, eq), value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    int* field = key == "sample_rate" ? &out.sample_rate : key == "channels" ? &out.channels : nullptr;
    if (!field) throw bad("\"" + key + "\": an alsa: device takes sample_rate and channels");
    const int low = field == &out.channels ? 1 : 1000, high = field == &out.channels ? 32 : 384000;
    if (value.empty() || value.size() > 6 || value.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(value) < low || std::stoi(value) > high) {
      throw bad(key + " must be a whole number in " + std::to_string(low) + ".." + std::to_string(high));
    }
    *field = std::stoi(value);
  }
  return out;
}

bool SourceConfig::same(const SourceConfig& o) const {
  return name == o.name && url == o.url && model == o.model && events == o.events && backoff_s == o.backoff_s &&
         backoff_max_s == o.backoff_max_s && timeout_s == o.timeout_s;
}

WebhookUrl parse_webhook_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) throw std::invalid_argument("\"" + url + "\": a webhook needs an http:// URL (https is not supported)");
  std::string rest = url.substr(scheme.size());
  WebhookUrl out;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    out.path = rest.substr(slash);
    rest = rest.substr(0, slash);
  }
  if (!rest.empty() && rest.front() == '[') {  // [v6]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos) throw std::invalid_argument("\"" + url + "\": an IPv6 host is written [addr]");
    out.host = rest.substr(1, close - 1);
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') throw std::invalid_argument("\"" + url + "\": [addr]:port expected");
      out.port = rest.substr(close + 2);
    }
  } else {
    const size_t colon = rest.rfind(':');
    out.host = rest.substr(0, colon);
    if (colon != std::string::npos) out.port = rest.substr(colon + 1);
  }
  if (out.host.empty()) throw std::invalid_argument("\"" + url + "\": no host");
  if (out.port.empty() || out.port.size() > 5 || out.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(out.port) > 65535) {
    throw std::invalid_argument("\"" + url + "\": the port must be a number up to 65535");
  }
  for (char c : out.path) {
    if (static_cast<unsigned char>(c) <= 0x20) throw std::invalid_argument("\"" + url + "\": a space or control character in the path");
  }
  return out;
}

EventSinkSpec parse_event_sink(const std::string& text) {
  if (text.rfind("jsonl:", 0) == 0) {
    const std::string path = text.substr(6);
    if (path.empty() || path.back() == '/') {
      throw std::invalid_argument("\"" + text + "\": jsonl: needs a file path, e.g. \"jsonl:/var/lib/corepool/events/NAME.jsonl\"");
    }
    return {EventSinkSpec::Kind::kJsonl, path};
  }
  if (text.rfind("webhook:", 0) == 0) {
    const std::string url = text.substr(8);
    parse_webhook_url(url);  // throws saying what is wrong
    return {EventSinkSpec::Kind::kWebhook, url};
  }
  throw std::invalid_argument("\"" + text + "\" is not a sink: \"jsonl:PATH\" or \"webhook:http://HOST:PORT/PATH\"");
}

std::vector<SourceConfig> read_sources(TomlReader& reader) {
  std::vector<SourceConfig> sources;
  const size_t n = reader.table_array("source");
  for (size_t i = 0; i < n; ++i) {
    SourceConfig s = read_one(reader, i);
    for (const SourceConfig& other : sources) {
      if (other.name == s.name) {
        reader.fail("source[" + std::to_string(i) + "].name",
                    "source \"" + s.name + "\" is named twice (first at line " + std::to_string(other.line) + ")");
      }
    }
    sources.push_back(std::move(s));
  }
  return sources;
}

}  // namespace corepool
