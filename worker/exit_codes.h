// The exit codes of the corepool binary and of its forked workers: one
// documented contract (README "Exit codes"), read by scripts, systemd and the
// supervisor's reaper. It lives in worker/, the lowest room that exits, so
// that the worker and every supervisor room include it without a header
// pointing upward (dependencies go supervisor -> worker only). Header only.
#pragma once

namespace corepool {

// Some values carry several names: one meaning per command, the same number.
// A bad command line is not here: CLI11 answers it itself (--help: 0, a bad
// flag or value: its own codes from 105 up).
enum class ExitCode : int {
  kOk = 0,                // every input done; serve: drained after SIGTERM/SIGINT; doctor: every line OK
  kInputsFailed = 1,      // batch: some inputs failed, each named on stderr
  kMergeIncomplete = 1,   // merge: some input has no complete result
  kEvalUnmatched = 1,     // eval: some reference file has no result
  kNoConfigFits = 1,      // tune: no configuration kept p99 under --p99-ms
  kDoctorWarn = 1,        // doctor: the worst line is WARN
  kUsage = 2,             // usage or config error (a bad key, --shard, scheduler variable or --manifest; a bad
                          // --format, --min-score or --merge-gap; eval: an unreadable or malformed list)
  kCannotListen = 2,      // serve: a listener cannot be opened (address in use, bad systemd socket)
  kDoctorFail = 2,        // doctor: a line is FAIL
  kModelError = 3,        // missing directory, not TorchScript, bad model.toml, output shape != labels
  kInternal = 4,          // anything else
  kWorkerStopped = 0,     // worker: asked to stop (recycled, drained), or its supervisor is gone
  kWorkerBootFailure = 70,  // worker: could not start (the model fails): the pool stops, no respawn
  kEngineNotRunnable = 126,  // launcher: corepool-engine found but could not be executed (the shell's 126)
  kEngineNotFound = 127,     // launcher: no corepool-engine next to it or in ../libexec/corepool (the shell's 127)
};

// The number handed to exit(), _exit() or returned from main().
constexpr int exit_status(ExitCode code) { return static_cast<int>(code); }

}  // namespace corepool
