// Where `corepool batch` may write the result of one input: OUT/<relative>.jsonl
// (or the extension of another --format) and nowhere else. The relative name comes from the file system (a walked
// directory, a file name), so it is checked like any outside input before it
// becomes a path. Called by the batch driver (supervisor/batch/batch.cc) for every
// input, before the result file is created.
#pragma once

#include <string>

namespace corepool {

// `out_dir` + "/" + `relative` + `extension`, or std::runtime_error when that
// could land outside `out_dir`: `relative` empty, absolute or holding a ".."
// component, a directory on the way below `out_dir` that is a symbolic link
// (or not a directory), or a result path that is itself a symbolic link. The
// message names the result path and the reason. `out_dir` itself may be a link.
std::string result_path(const std::string& out_dir, const std::string& relative,
                        const std::string& extension = ".jsonl");

}  // namespace corepool
