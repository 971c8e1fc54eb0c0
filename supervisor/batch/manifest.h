// `--manifest FILE`: the inputs of a batch as an explicit list, one path per
// line, as schedulers pass them. Each line gets the same result key on every
// machine and in every shard, so a manifest splits like a directory does.
// Called by the batch and merge commands; owns nothing after returning.
#pragma once

#include <stdexcept>
#include <string>

#include "supervisor/batch/inputs.h"

namespace corepool {

// The manifest itself cannot be used (unreadable, lists nothing, bad --root).
class ManifestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads FILE: blank lines are skipped, a trailing '\r' is dropped, every other
// line is one path, used exactly as written (spaces included). A relative path
// is relative to the manifest's own directory. The result key of a line is its
// path relative to `root` (made absolute, lexically normalised, symlinks not
// resolved) or, when `root` is empty, relative to the deepest directory that
// holds every listed file. A line outside `root` or naming a directory ("x/")
// becomes an error of that line. Files are not opened here (see below).
InputList read_manifest(const std::string& file, const std::string& root);

// Moves every manifest input whose file is missing or is a directory into the
// errors, keyed by its result, naming the manifest line:
// "files.txt:17: /data/x.wav: no such file or directory".
void check_listed_files(InputList& list);

}  // namespace corepool
