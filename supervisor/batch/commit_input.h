// The end of one finished input on a batch driver's committer thread, the
// same in both drivers (batch.cc, stateful_batch.cc): its last lines are
// written, its result file joins the committer's group, and it is counted
// once, when the group has put it in place or when anything failed (its
// temporary file then removed). The group commits when the committer has
// nothing more queued, or when it is full.
#pragma once

#include <exception>
#include <memory>
#include <string>

#include "supervisor/batch/result_file.h"
#include "supervisor/batch/result_writer.h"

namespace corepool {

// Job: has `std::string error`, `input.path` and `std::unique_ptr<ResultWriter> out`.
// write(Job&) may throw; settle(Job&) counts it (error empty: done);
// queued() is how many commits wait on the committer, asked at the end.
template <class Job, class Write, class Settle, class Queued>
void commit_input(const std::shared_ptr<Job>& job, CommitGroup& group, Write write, Settle settle, Queued queued) {
  if (job->error.empty()) {
    try {
      write(*job);
      job->out->commit(group, [job, settle](const std::string& error) {
        if (!error.empty()) job->error = job->input.path + ": " + error;
        settle(*job);
      });
    } catch (const std::exception& e) {
      job->error = job->input.path + ": " + e.what();
    }
  }
  if (!job->error.empty()) {
    job->out->abandon();
    settle(*job);
  }
  if (queued() == 0 || group.size() >= CommitGroup::kMaxFiles) group.commit();
}

}  // namespace corepool
