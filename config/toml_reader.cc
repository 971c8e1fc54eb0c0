// TomlReader: reads one TOML file with toml++ and hands out checked values,
// remembering what was read so leftovers can be reported as typos. Used by
// load_config() and load_model_config(); owns nothing beyond the parsed table.
#include "config/toml_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

namespace corepool {
namespace {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

// Read by hand rather than toml::parse_file so a missing file reports errno.
std::string read_whole_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw ConfigError(path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buffer[1 << 14];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, n);
  // fopen() succeeds on a directory; the read is what fails (EISDIR).
  if (std::ferror(file.get())) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  return text;
}

toml::table parse_text(const std::string& text, const std::string& path) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    const auto& at = error.source().begin;
    throw ConfigError(path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                      ": " + std::string(error.description()));
  }
}

std::vector<std::string> split_path(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', start)) {
    parts.push_back(key.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(key.substr(start));
  return parts;
}

const char* type_phrase(toml::node_type type) {
  switch (type) {
    case toml::node_type::none: return "nothing";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
  }
  return "an unknown type";
}

int line_of(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

// One step of a dotted path: "name" in a table, or "name[3]", an element of
// an array of tables.
const toml::node* step(const toml::table& table, const std::string& part) {
  const size_t open = part.find('[');
  if (open == std::string::npos || part.back() != ']') return table.get(part);
  const toml::node* node = table.get(part.substr(0, open));
  const toml::array* array = node ? node->as_array() : nullptr;
  if (!array) return nullptr;
  const std::string index = part.substr(open + 1, part.size() - open - 2);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) return nullptr;
  return array->get(std::stoul(index));
}

std::string range_text(double min, double max, TomlReader::Bound lower) {
  const bool exclusive = lower == TomlReader::Bound::kExclusive;
  if (std::isinf(max)) {
    return (exclusive ? "must be greater than " : "must be at least ") + format_number(min);
  }
  if (exclusive) {
    return "must be greater than " + format_number(min) + " and at most " + format_number(max);
  }
  return "must be between " + format_number(min) + " and " + format_number(max);
}

std::string one_of_text(const std::vector<std::string>& allowed) {
  std::string text = "must be one of ";
  for (size_t i = 0; i < allowed.size(); ++i) text += (i ? ", " : "") + toml_quote(allowed[i]);
  return text;
}

}  // namespace

std::string format_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string toml_quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        // Other control characters are not allowed raw in a basic string.
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned char>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string toml_key(std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
  return bare ? std::string(key) : toml_quote(key);
}

TomlReader::TomlReader(const std::string& path) : file_(path), root_(parse_text(read_whole_file(path), path)) {}

TomlReader::TomlReader(const std::string& name, const std::string& text) : file_(name), root_(parse_text(text, name)) {}

// Walks `key` from the root, marking each table passed through as known.
const toml::node* TomlReader::find(const std::string& key) {
  const std::vector<std::string> parts = split_path(key);
  const toml::table* table = &root_;
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const toml::node* node = step(*table, parts[i]);
    if (!node || i + 1 == parts.size()) return node;
    walked += (i ? "." : "") + parts[i];
    if (!node->is_table()) fail_type(walked, *node, "a table");
    known_tables_.insert(node);
    table = node->as_table();
  }
  return nullptr;
}

// The node for `key`, or its deepest present ancestor; only for locating errors.
const toml::node* TomlReader::find_or_parent(const std::string& key) const {
  const toml::node* found = nullptr;
  const toml::table* table = &root_;
  for (const std::string& part : split_path(key)) {
    const toml::node* node = table ? step(*table, part) : nullptr;
    if (!node) break;
    found = node;
    table = node->as_table();
  }
  return found;
}

void TomlReader::fail(const std::string& key, const std::string& reason) const {
  const toml::node* node = find_or_parent(key);
  fail_at(node ? line_of(*node) : 0, key, reason);
}

void TomlReader::fail_at(int line, const std::string& key, const std::string& reason) const {
  const std::string where = line > 0 ? file_ + ":" + std::to_string(line) : file_;
  throw ConfigError(where + ": " + key + ": " + reason);
}

void TomlReader::fail_type(const std::string& key, const toml::node& node,
                           const char* expected) const {
  fail_at(line_of(node), key,
          std::string("expected ") + expected + ", got " + type_phrase(node.type()));
}

int TomlReader::get_int(const std::string& key, int fallback, int min, int max) {
  const toml::node* node = find(key);
  if (!node) return fallback;
  used_.insert(node);
  const auto* integer = node->as_integer();
  if (!integer) fail_type(key, *node, "an integer");
  // Compare as int64 so that a huge value is reported, not truncated into range.
  const std::int64_t value = integer->get();
  if (value < min || value > max) {
    fail_at(line_of(*node), key,
            "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                ", got " + std::to_string(value));
  }
  return static_cast<int>(value);
}

double TomlReader::get_double(const std::string& key, double fallback, double min, double max,
                              Bound lower) {
  const toml::node* node = find(key);
  if (!node) return fallback;
  used_.insert(node);
  double value = 0;
  if (const auto* floating = node->as_floating_point()) {
    value = floating->get();
  } else if (const auto* integer = node->as_integer()) {
    value = static_cast<double>(integer->get());  // "1" means 1.0; nobody should have to write 1.0
  } else {
    fail_type(key, *node, "a number");
  }
  // Written so that NaN fails every bound.
  const bool above_min = lower == Bound::kExclusive ? value > min : value >= min;
  if (!above_min || !(value <= max)) {
    fail_at(line_of(*node), key, range_text(min, max, lower) + ", got " + format_number(value));
  }
  return value;
}

bool TomlReader::get_bool(const std::string& key, bool fallback) {
  const toml::node* node = find(key);
  if (!node) return fallback;
  used_.insert(node);
  const auto* boolean = node->as_boolean();
  if (!boolean) fail_type(key, *node, "a boolean (true or false)");
  return boolean->get();
}

std::string TomlReader::get_string(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& allowed) {
  const toml::node* node = find(key);
  if (!node) return fallback;
  used_.insert(node);
  const auto* string = node->as_string();
  if (!string) fail_type(key, *node, "a string");
  const std::string& value = string->get();
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    fail_at(line_of(*node), key, one_of_text(allowed) + "; got " + toml_quote(value));
  }
  return value;
}

std::vector<std::string> TomlReader::get_string_array(const std::string& key,
                                                      const std::vector<std::string>& fallback) {
  const toml::node* node = find(key);
  if (!node) return fallback;
  used_.insert(node);
  const auto* array = node->as_array();
  if (!array) fail_type(key, *node, "an array of strings");
  std::vector<std::string> values;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const auto* string = element.as_string();
    if (!string) fail_type(key + "[" + std::to_string(i) + "]", element, "a string");
    values.push_back(string->get());
  }
  return values;
}

std::vector<int64_t> TomlReader::get_int_array(const std::string& key, const std::vector<int64_t>& fallback,
                                               int64_t min, int64_t max) {
  const toml::node* node = find(key);
  if (!node) return fallback;
  used_.insert(node);
  const auto* array = node->as_array();
  if (!array) fail_type(key, *node, "an array of integers");
  std::vector<int64_t> values;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const std::string path = key + "[" + std::to_string(i) + "]";
    const auto* integer = element.as_integer();
    if (!integer) fail_type(path, element, "an integer");
    const std::int64_t value = integer->get();
    if (value < min || value > max) {
      fail_at(line_of(element), path,
              "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                  std::to_string(value));
    }
    values.push_back(value);
  }
  return values;
}

std::vector<TomlReader::NumberEntry> TomlReader::get_number_table(const std::string& key,
                                                                  double min, double max) {
  const toml::node* node = find(key);
  if (!node) return {};
  used_.insert(node);  // the whole table: its keys are data, never "unknown"
  const auto* table = node->as_table();
  if (!table) fail_type(key, *node, "a table");
  std::vector<NumberEntry> entries;
  for (auto&& [name, value] : *table) {
    NumberEntry entry{std::string(name.str()), key + "." + toml_key(name.str()), 0,
                      line_of(value)};
    if (const auto* floating = value.as_floating_point()) {
      entry.value = floating->get();
    } else if (const auto* integer = value.as_integer()) {
      entry.value = static_cast<double>(integer->get());
    } else {
      fail_type(entry.path, value, "a number");
    }
    if (!(entry.value >= min && entry.value <= max)) {
      fail_at(entry.line, entry.path,
              range_text(min, max, Bound::kInclusive) + ", got " + format_number(entry.value));
    }
    entries.push_back(std::move(entry));
  }
  // The table iterates by key; report problems in the order a reader sees them.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const NumberEntry& a, const NumberEntry& b) { return a.line < b.line; });
  return entries;
}

size_t TomlReader::table_array(const std::string& key) {
  const toml::node* node = find(key);
  if (!node) return 0;
  const auto* array = node->as_array();
  if (!array || !(array->empty() || array->is_array_of_tables())) {
    const std::string expected = "an array of tables ([[" + key + "]])";
    fail_type(key, *node, expected.c_str());
  }
  known_tables_.insert(node);
  for (const toml::node& element : *array) known_tables_.insert(&element);
  return array->size();
}

bool TomlReader::is_string(const std::string& key) {
  const toml::node* node = find(key);
  return node && node->is_string();
}

int TomlReader::line(const std::string& key) const {
  const toml::node* node = find_or_parent(key);
  return node ? line_of(*node) : 0;
}

bool TomlReader::has(const std::string& key) { return find(key) != nullptr; }

void TomlReader::require(const std::string& key) {
  if (!has(key)) fail(key, "required key is missing");
}

void TomlReader::collect_unknown(const toml::table& table, const std::string& prefix,
                                 std::vector<std::pair<int, std::string>>& out) const {
  for (auto&& [name, node] : table) {
    const std::string path = (prefix.empty() ? "" : prefix + ".") + toml_key(name.str());
    if (used_.count(&node)) continue;
    if (node.is_table() && known_tables_.count(&node)) {
      collect_unknown(*node.as_table(), path, out);
    } else if (node.is_array() && known_tables_.count(&node)) {  // [[name]]: each element's keys
      const toml::array& array = *node.as_array();
      for (size_t i = 0; i < array.size(); ++i) {
        collect_unknown(*array.get(i)->as_table(), path + "[" + std::to_string(i) + "]", out);
      }
    } else {
      out.emplace_back(line_of(node), path);
    }
  }
}

void TomlReader::check_no_unknown_keys() const {
  std::vector<std::pair<int, std::string>> unknown;
  collect_unknown(root_, "", unknown);
  if (unknown.empty()) return;
  const auto first = std::min_element(unknown.begin(), unknown.end());
  fail_at(first->first, first->second, "unknown key");
}

}  // namespace corepool
