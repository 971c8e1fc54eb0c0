// Markdown and roff over config_keys.cc's table. The prose around the tables
// lives here, once for both formats where it can; a row's cells come from the
// row and the defaults from Config{}, so neither reference can drift.
#include "config/config_doc.h"

#include <utility>
#include <vector>

#include "config/config_keys.h"

namespace corepool {
namespace {

// The sections in the order of the table (and of corepool.toml).
std::vector<std::string> sections() {
  std::vector<std::string> out;
  for (const ConfigKey& key : config_keys()) {
    if (out.empty() || out.back() != key_section(key)) out.push_back(key_section(key));
  }
  return out;
}

const char* const kIntro =
    "corepool reads one TOML file, named by `--config FILE` (the Debian package's service reads "
    "/etc/corepool/corepool.toml; config/corepool.toml in the source tree is that file, every key at its "
    "default). Every key is optional. A flag on the command line overrides the file. An unknown key, a "
    "wrong type or a value out of range stops startup with `FILE:LINE: KEY: reason`.";

const char* const kReloadYes = "the next generation uses the new value.";
const char* const kReloadRestart =
    "a SIGHUP reload logs a WARN and keeps the running value until the next restart; a repository "
    "load's `parameters.config` refuses the change.";
const char* const kReloadRefused = "the reload fails; the running generation keeps serving.";

// [[source]] tables (config/source_config.h): not rows of the key table (a
// file holds any number of them), so described here, for both references.
const char* const kSourceIntro =
    "Audio `corepool serve` pulls itself: one `[[source]]` table per file, pipe, HTTP / Icecast or RTSP stream, or ALSA capture device "
    "(none by default). Each one's events go to its sinks as they close; a dropped source reconnects after a "
    "back-off; a reload starts the new tables, stops the removed ones, restarts the changed ones and leaves the "
    "others running. docs/api.md (Sources the service pulls itself) says the rest.";
const std::pair<const char*, const char*> kSourceKeys[] = {
    {"name", "string, required: 1 to 64 of A-Z a-z 0-9 _ -, unique; names the source in events, /v2/sources and "
             "/metrics"},
    {"url", "string, required: a file path, any URL FFmpeg opens (http, https, rtsp, tcp, pipe:N, ...), or an ALSA "
            "capture device as alsa:DEVICE[?sample_rate=R&channels=C] (alsa:default, alsa:hw:1,0; FFmpeg's defaults "
            "48000 Hz, 2 channels)"},
    {"model", "string, default the served model: serve serves one model; another name stops the start (or the reload)"},
    {"events", "string or array of strings, required: \"jsonl:PATH\" (one line per event, a file per UTC day: "
               "PATH's stem gets -YYYY-MM-DD) or \"webhook:http://HOST:PORT/PATH\" (each event POSTed as JSON)"},
    {"backoff_s", "number, default 1 (0.01..3600): the first wait before a reconnect, doubling each failure"},
    {"backoff_max_s", "number, default 60 (0.01..86400): the longest wait; back to backoff_s after a connection "
                      "that ran this long (at most 30 s)"},
    {"timeout_s", "number, default 10 (0.1..3600): an open or a read silent this long drops the connection"},
};

std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string code(const std::string& text) { return "`" + text + "`"; }

// Text for roff: backslashes, minus signs and a leading control character escaped.
std::string roff(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else if (c == '`') {
      continue;  // markdown's code quotes
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out = "\\&" + out;
  return out;
}

}  // namespace

std::string config_reference_markdown() {
  const Config defaults;
  std::string md =
      "# Configuration reference\n\n"
      "<!-- Generated from config/config_keys.cc by `build/tools/corepool-config-doc --markdown`: edit the\n"
      "     table there and regenerate; tests/unit/config_reference_test.cc fails while this file differs. -->\n\n";
  md += std::string(kIntro) + "\n\n";
  md += "Reload (SIGHUP, or `POST /v2/repository/models/NAME/load`):\n\n";
  md += "- yes: " + std::string(kReloadYes) + "\n";
  md += "- warns-until-restart: " + std::string(kReloadRestart) + "\n";
  md += "- refused: " + std::string(kReloadRefused) + "\n";
  for (const std::string& section : sections()) {
    md += "\n## [" + section + "]\n\n";
    md += "| Key | Type | Default | Allowed | Reload | Flag | Meaning |\n";
    md += "|-----|------|---------|---------|--------|------|---------|\n";
    for (const ConfigKey& key : config_keys()) {
      if (key_section(key) != section) continue;
      md += "| " + code(key_leaf(key)) + " | " + type_name(key.type) + " | " + cell(code(toml_value(key, defaults))) +
            " | " + cell(allowed_text(key)) + " | " + reload_name(key.reload) + " | " +
            (key.flag ? code(key.flag) : "") + " | " + cell(key.doc) + " |\n";
    }
  }
  md += "\n## [[source]]\n\n" + std::string(kSourceIntro) + "\n\n";
  for (const auto& [key, text] : kSourceKeys) md += "- " + code(key) + ": " + text + "\n";
  return md;
}

std::string config_reference_roff(const std::string& version) {
  const Config defaults;
  std::string man = ".TH COREPOOL.TOML 5 \"\" \"" + roff(version) + "\" \"File Formats\"\n";
  man += ".SH NAME\ncorepool.toml \\- configuration file of corepool\n";
  man += ".SH SYNOPSIS\n/etc/corepool/corepool.toml\n";
  man += ".SH DESCRIPTION\n" + roff(kIntro) + "\n";
  man += ".PP\nEach key below: its type, default, allowed values, what a reload does with it, its flag.\n";
  for (const std::string& section : sections()) {
    man += ".SS [" + section + "]\n";
    for (const ConfigKey& key : config_keys()) {
      if (key_section(key) != section) continue;
      man += ".TP\n.B " + key_leaf(key) + "\n";
      man += roff(std::string(type_name(key.type)) + ", default " + toml_value(key, defaults) + " (" +
                  allowed_text(key) + "); reload: " + reload_name(key.reload) +
                  (key.flag ? std::string("; flag ") + key.flag : std::string())) +
             ".\n.br\n" + roff(key.doc) + ".\n";
    }
  }
  man += ".SS [[source]]\n" + roff(kSourceIntro) + "\n";
  for (const auto& [key, text] : kSourceKeys) man += ".TP\n.B " + std::string(key) + "\n" + roff(text) + ".\n";
  man += ".SH RELOAD\nSIGHUP, or a repository load (POST /v2/repository/models/NAME/load), re-reads the file.\n";
  man += ".TP\n.B yes\n" + roff(kReloadYes) + "\n";
  man += ".TP\n.B warns\\-until\\-restart\n" + roff(kReloadRestart) + "\n";
  man += ".TP\n.B refused\n" + roff(kReloadRefused) + "\n";
  man += ".SH FILES\n.TP\n.I /etc/corepool/corepool.toml\nthe service's configuration, every key at its default.\n";
  man += ".SH SEE ALSO\n.BR corepool (1)\n";
  return man;
}

}  // namespace corepool
