#include "worker/kernels/onednn_context.h"

#include <cstdlib>
#include <memory>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

namespace corepool {

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_thread_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

void* onednn_thread_scratch(size_t bytes) {
  struct Buffer {
    std::unique_ptr<void, decltype(&std::free)> data{nullptr, &std::free};
    size_t size = 0;
  };
  thread_local Buffer buffer;
  if (buffer.size < bytes) {
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    buffer.data.reset(std::aligned_alloc(4096, rounded));
    TORCH_CHECK(buffer.data, "oneDNN: cannot allocate a scratchpad of ", rounded, " bytes");
    buffer.size = rounded;
  }
  return buffer.data.get();
}

void apply_libtorch_threads() { (void)at::get_num_threads(); }

dnnl::primitive_attr inference_attr(bool relu) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

}  // namespace corepool
