// jemalloc's background threads (MALLOC_CONF background_thread:true) give a
// process's freed pages back after dirty_decay_ms even while it is idle. They
// do not survive fork(): jemalloc turns them off in the child. A forked worker
// runs without them (they cost it a quarter of its throughput or more: it is
// woken tens of thousands of times a run) and gives its freed pages back
// itself: after its start-up check forward() (9 MB of activations for the
// 316 MB bench model's 1.2 M-wide hidden layer) and at each idle spell.
#pragma once

namespace corepool {

// Stops jemalloc's background threads in this process: for a run that never
// idles (`corepool batch`), where they only take the engines' cpus. True when
// they were asked to stop; false, and nothing changed, on another allocator.
bool stop_allocator_background_thread();

// Gives every freed page of jemalloc's arenas back to the kernel now, rather
// than after dirty_decay_ms: for a worker after its start-up check forward(),
// whose activations it will not need again (at the service's batch, oversize
// activations come from their own arena). False on another allocator.
bool purge_allocator();

}  // namespace corepool
