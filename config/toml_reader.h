// Typed, validated reads from one TOML file, shared by config.cc and model_config.cc
// so that type, range and unknown-key checks are written once. Every failure is a
// ConfigError "FILE:LINE: KEY: reason". A TomlReader owns the parsed document; make
// one per load, call the getters, then check_no_unknown_keys(), then drop it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "config/config_error.h"

namespace corepool {

class TomlReader {
 public:
  // Whether the lower bound of a double range is itself allowed.
  enum class Bound { kInclusive, kExclusive };

  // One key = number pair of a table whose keys are data, not schema
  // (e.g. [labels.thresholds], keyed by label name).
  struct NumberEntry {
    std::string key;   // the raw key, e.g. "speech"
    std::string path;  // the dotted path for messages, e.g. "labels.thresholds.speech"
    double value = 0;
    int line = 0;
  };

  // Reads and parses `path`. Throws "FILE: cannot open: <strerror>" or, for bad
  // TOML, "FILE:LINE:COL: <description>". `path` names the file in all messages.
  explicit TomlReader(const std::string& path);
  // The same over `text` already in memory; `name` stands for the file in messages.
  TomlReader(const std::string& name, const std::string& text);
  TomlReader(const TomlReader&) = delete;
  TomlReader& operator=(const TomlReader&) = delete;

  // Getters take dotted paths ("engine.workers"); an absent key yields `fallback`.
  // Each one marks the key consumed and throws on a wrong type or a bad value.
  int get_int(const std::string& key, int fallback, int min, int max);
  double get_double(const std::string& key, double fallback, double min, double max,
                    Bound lower = Bound::kInclusive);
  bool get_bool(const std::string& key, bool fallback);
  // `allowed` empty = any string.
  std::string get_string(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& allowed = {});
  std::vector<std::string> get_string_array(const std::string& key,
                                            const std::vector<std::string>& fallback);
  // Every element must be an integer in [min, max].
  std::vector<int64_t> get_int_array(const std::string& key, const std::vector<int64_t>& fallback,
                                     int64_t min, int64_t max);
  // Every entry of the sub-table at `key` (none if absent), ordered by line;
  // each value must be a number in [min, max].
  std::vector<NumberEntry> get_number_table(const std::string& key, double min, double max);

  // An array of tables ([[source]]): how many (0 if absent). Its elements'
  // keys are then read as "source[0].name"; unread ones are unknown keys.
  size_t table_array(const std::string& key);
  bool is_string(const std::string& key);
  // The line of `key` (or of its nearest present parent), 0 if none: for
  // errors found after reading, e.g. a duplicate name.
  int line(const std::string& key) const;

  bool has(const std::string& key);
  const std::string& file() const { return file_; }
  // Throws "required key is missing" unless `key` is present.
  void require(const std::string& key);

  // Throws ConfigError for `key`, at the line of its node, or of its nearest
  // present parent table, or with no line when neither exists.
  [[noreturn]] void fail(const std::string& key, const std::string& reason) const;
  [[noreturn]] void fail_at(int line, const std::string& key, const std::string& reason) const;

  // Throws "unknown key" for the first (by line) key that no getter consumed.
  void check_no_unknown_keys() const;

 private:
  const toml::node* find(const std::string& key);
  const toml::node* find_or_parent(const std::string& key) const;
  [[noreturn]] void fail_type(const std::string& key, const toml::node& node,
                              const char* expected) const;
  void collect_unknown(const toml::table& table, const std::string& prefix,
                       std::vector<std::pair<int, std::string>>& out) const;

  std::string file_;
  toml::table root_;
  // Leaves (and wholesale-consumed tables) some getter read.
  std::unordered_set<const toml::node*> used_;
  // Tables some getter looked inside: their other keys are typos, not sections.
  std::unordered_set<const toml::node*> known_tables_;
};

// Text helpers shared by the loaders' messages and by to_toml().
// Shortest decimal text that reads back as exactly `value` ("0.5", "8000", "1e-07").
std::string format_number(double value);
// A TOML basic string, quoted and escaped: "say \"hi\"".
std::string toml_quote(std::string_view text);
// A TOML key: bare when it may be (A-Z a-z 0-9 _ -), quoted otherwise.
std::string toml_key(std::string_view key);

}  // namespace corepool
