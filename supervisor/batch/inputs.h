// Turns the PATH arguments of `corepool batch` (files, directories searched
// recursively for audio extensions, or glob patterns) into a sorted list of
// inputs, each with the output name it gets under --out.
#pragma once

#include <string>
#include <vector>

namespace corepool {

struct BatchInput {
  std::string path;      // as opened
  std::string relative;  // output key: path under the directory argument, or the file name
  std::string origin;    // "<manifest>:<line>" for a manifest line, else empty
  bool pipe = false;     // standard input ("-"): path and relative are both "stdin"
};

// The argument that means standard input, and what results and messages call it.
constexpr const char* kStdinArg = "-";
constexpr const char* kStdinName = "stdin";

struct InputError {
  std::string key;      // the result key it concerns; empty: a whole argument (every shard reports it)
  std::string message;  // one line: "<arg>: no such file or directory", ...
};

struct InputList {
  std::vector<BatchInput> inputs;
  std::vector<InputError> errors;
};

// Audio extensions picked up when walking a directory (case-insensitive).
bool has_audio_extension(const std::string& path);

// Directories are walked in sorted order; files named directly are taken
// whatever their extension (validation decides). Two inputs that would write
// the same output get an error for the second one. `listed` (a manifest's
// inputs and errors) comes first and takes part in that check.
InputList expand_inputs(const std::vector<std::string>& args, InputList listed = {});

}  // namespace corepool
