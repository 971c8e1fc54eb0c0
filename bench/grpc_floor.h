// The floor of gRPC itself on this machine: ServerLive answered by a minimal
// in-process server (no corepool code) in each of grpc++'s three server APIs
// (synchronous, callback as corepool's server uses, completion queue), and
// from a completion queue in a server that also has a callback method (the
// mix a completion-queue ModelInfer would make); called by the same
// synchronous stub the benchmark uses. Tells what any gRPC front end could
// reach here, so that corepool's gRPC overhead can be read against it.
#pragma once

namespace corepool::bench {

// Prints one line per server API: p50 and p90 of `requests` calls.
void print_bare_grpc_floor(int requests);

}  // namespace corepool::bench
