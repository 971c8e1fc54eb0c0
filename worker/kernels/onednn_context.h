// What every oneDNN call of corepool's own layers (winograd_conv.h,
// onednn_linear.h) shares: the CPU engine, one stream per thread, one
// scratchpad per thread, and LibTorch's thread count applied before oneDNN
// reads it.
#pragma once

#include <cstddef>

#include <oneapi/dnnl/dnnl.hpp>

namespace corepool {

dnnl::engine& onednn_engine();

// Streams are cheap but not to be shared between threads.
dnnl::stream& onednn_thread_stream();

// This thread's scratchpad, grown to `bytes` if smaller. A fresh allocation per
// call would be a fresh mmap (glibc) or freshly purged pages (jemalloc) every
// call, and for Winograd the page faults cost as much as the convolution itself
// (measured: 11 vs 18 ms per segment). It comes from malloc, never the c10
// allocator: inside the optimizer's arena scope that would put it in the arena,
// which is sealed read-only before any worker writes it.
void* onednn_thread_scratch(size_t bytes);

// oneDNN reads the calling thread's OpenMP thread count. LibTorch applies its
// own setting (1 in corepool) to a thread lazily, on that thread's first
// parallel query: make sure that has happened before oneDNN runs here.
void apply_libtorch_threads();

// The attributes of every primitive here: the scratchpad passed by the caller
// (onednn_thread_scratch, so threads never share one) and, with `relu`, a
// fused ReLU.
dnnl::primitive_attr inference_attr(bool relu);

}  // namespace corepool
