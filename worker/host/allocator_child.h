// jemalloc's background threads (MALLOC_CONF background_thread:true) give a
// process's freed pages back after dirty_decay_ms even while it is idle. They
// do not survive fork(): jemalloc turns them off in the child. A forked worker
// then gives pages back only while it allocates, so what it freed last (the
// activations of its start-up check forward(), 9 MB for the 316 MB bench
// model's 1.2 M-wide hidden layer) stayed resident for its whole life.
#pragma once

namespace corepool {

// Turns jemalloc's background threads back on in a forked process when the
// allocator is jemalloc and its options ask for them; true when they run.
// False, and nothing changed, on any other allocator or configuration.
bool restart_allocator_background_thread();

// Gives every freed page of jemalloc's arenas back to the kernel now, rather
// than after dirty_decay_ms: for a worker after its start-up check forward(),
// whose activations it will not need again (at the service's batch, oversize
// activations come from their own arena). False on another allocator.
bool purge_allocator();

}  // namespace corepool
