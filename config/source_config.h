// serve's [[source]] tables: audio the service pulls itself (a file, a pipe,
// an HTTP / Icecast stream, RTSP, ...) and where each source's events go.
// Read by load_config() (config.cc) into Config::sources; run by
// supervisor/serve/source_set.h. Plain values, copied freely.
#pragma once

#include <string>
#include <vector>

namespace corepool {

class TomlReader;

// Where a source's events go: "jsonl:PATH" (one JSON object a line, a file a
// UTC day: PATH's stem gets "-YYYY-MM-DD") or "webhook:http://HOST:PORT/PATH"
// (each event POSTed as JSON).
struct EventSinkSpec {
  enum class Kind { kJsonl, kWebhook };
  Kind kind = Kind::kJsonl;
  std::string target;  // the path or the URL
  bool operator==(const EventSinkSpec& o) const { return kind == o.kind && target == o.target; }
};

struct SourceConfig {
  std::string name;   // [A-Za-z0-9_-]{1,64}, unique: names the source in events, /v2/sources and /metrics
  std::string url;    // a path (a file), alsa:DEVICE, or any URL FFmpeg opens: http(s)://, rtsp://, pipe:N, ...
  std::string model;  // "" = the model serve serves (serve serves one: another name is refused at start)
  std::vector<EventSinkSpec> events;
  double backoff_s = 1;       // the first wait before a reconnect; doubles each failure
  double backoff_max_s = 60;  // ... up to this; back to backoff_s after a healthy run
  double timeout_s = 10;      // connect or read silent this long: the source dropped
  std::string file;           // the config file and where its table is (for messages)
  int line = 0;
  int index = 0;              // its place among the [[source]] tables: "source[INDEX]"

  // A path (no "scheme://", no "pipe:", no "alsa:"). A regular file's end
  // is the source's end ("finished"); a FIFO's or a device's is a drop.
  bool is_file() const;
  // An ALSA capture device (parse_alsa_url).
  bool is_alsa() const { return url.rfind("alsa:", 0) == 0; }
  // Same source: a reload leaves it running (`line` aside).
  bool same(const SourceConfig& o) const;
};

// "alsa:DEVICE[?sample_rate=R][&channels=C]": an ALSA capture device as
// arecord -D names it ("alsa:default", "alsa:hw:1,0", "alsa:plughw:CARD=Mic,
// DEV=0?sample_rate=16000&channels=1"), opened through FFmpeg's libavdevice.
// Without them, FFmpeg's own defaults: 48000 Hz, 2 channels.
struct AlsaUrl {
  std::string device;
  int sample_rate = 48000;  // 1000..384000
  int channels = 2;         // 1..32
};
// Throws std::invalid_argument saying what is wrong.
AlsaUrl parse_alsa_url(const std::string& url);

struct WebhookUrl {
  std::string host;
  std::string port = "80";
  std::string path = "/";
};
// "http://host:port/path" (port and path optional; [v6] hosts too). Throws
// std::invalid_argument saying what is wrong.
WebhookUrl parse_webhook_url(const std::string& url);

// "FILE:LINE: source[I].KEY: source "NAME": reason", for checks made after
// the file was read (the model's name is known once it is loaded).
std::string source_error(const SourceConfig& source, const std::string& key, const std::string& reason);

// "jsonl:PATH" / "webhook:URL" -> a spec; throws std::invalid_argument saying what is expected.
EventSinkSpec parse_event_sink(const std::string& text);

// Every [[source]] table of `reader`'s file, checked: types, names (pattern,
// unique), url, events, back-off. Throws ConfigError "FILE:LINE: source[i].KEY:
// source "NAME": reason".
std::vector<SourceConfig> read_sources(TomlReader& reader);

}  // namespace corepool
