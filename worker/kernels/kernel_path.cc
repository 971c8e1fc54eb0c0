#include "worker/kernels/kernel_path.h"

#include "worker/kernels/packed_gemm.h"
#include "worker/kernels/winograd_conv.h"

namespace corepool {

const std::vector<std::string>& kernel_path_names() {
  static const std::vector<std::string> names{"auto", "onednn", "corepool", "portable", "torch"};
  return names;
}

const char* kernel_path_name(KernelPath path) {
  return kernel_path_names()[static_cast<size_t>(path)].c_str();
}

std::optional<KernelPath> parse_kernel_path(const std::string& name) {
  const auto& names = kernel_path_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<KernelPath>(i);
  }
  return std::nullopt;
}

std::string kernel_path_unavailable(KernelPath path) {
  switch (path) {
    case KernelPath::kOnednn:
      // 16 -> 16 channels: the smallest layer oneDNN's Winograd takes at all.
      if (!winograd_available(kChannelBlock, kChannelBlock)) {
        return "this CPU's oneDNN has no Winograd convolution (oneDNN 2.6 has one for AVX-512 only)";
      }
      return "";
    case KernelPath::kCorepool:
      if (!packed_gemm_available()) return "this CPU has no AVX2 + FMA (corepool's Winograd and packed GEMM need them)";
      return "";
    default:
      return "";
  }
}

std::vector<KernelPath> runnable_kernel_paths() {
  std::vector<KernelPath> out;
  for (const std::string& name : kernel_path_names()) {
    const KernelPath path = *parse_kernel_path(name);
    if (kernel_path_unavailable(path).empty()) out.push_back(path);
  }
  return out;
}

}  // namespace corepool
