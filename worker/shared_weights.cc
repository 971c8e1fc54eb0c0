// Moves a module's weights into the weight segment and binds tensors to it.
// Only memcpy, from_blob and set_data touch tensors here: the supervisor runs
// this before fork(), and a LibTorch op could start GNU OpenMP's thread pool,
// which a forked child cannot use.
#include "worker/shared_weights.h"

#include "worker/model/torch_module.h"
#include "worker/shape_text.h"

#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "shm/weight_table.h"

namespace corepool {
namespace {

// One tensor of the module as found; `tensor` shares the module's TensorImpl,
// so set_data() on it changes what the module sees.
struct ModuleTensor {
  std::string name;
  shm::WeightKind kind;
  at::Tensor tensor;
};

std::string label(const ModuleTensor& t) {
  return (t.kind == shm::WeightKind::kParameter ? "parameter '" : "buffer '") + t.name + "'";
}

std::vector<ModuleTensor> module_tensors(const torch::jit::Module& module) {
  std::vector<ModuleTensor> out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    out.push_back({p.name, shm::WeightKind::kParameter, p.value});
  }
  for (const auto& b : module.named_buffers(/*recurse=*/true)) {
    out.push_back({b.name, shm::WeightKind::kBuffer, b.value});
  }
  return out;
}

// Raw bytes plus sizes and strides describe these tensors completely; anything
// whose meaning lives elsewhere (quantizer, conj/neg bit, layout) does not fit.
void check_shareable(const ModuleTensor& m) {
  const at::Tensor& t = m.tensor;
  auto fail = [&](const std::string& why) { throw std::runtime_error(label(m) + ": " + why); };
  if (m.name.size() > shm::kMaxWeightNameLength) {
    fail("name is " + std::to_string(m.name.size()) + " bytes; the weight table holds at most " +
         std::to_string(shm::kMaxWeightNameLength));
  }
  if (!t.defined()) fail("is undefined");
  if (!t.device().is_cpu()) fail("is on " + t.device().str() + "; only CPU tensors can be shared");
  if (t.layout() != at::kStrided) fail("is not a strided (dense) tensor");
  if (t.is_quantized()) fail("is quantized; quantized tensors cannot be shared");
  if (t.is_conj() || t.is_neg()) fail("is a lazy conjugate or negative view; cannot be shared");
  if (t.dim() > shm::kMaxWeightDims) {
    fail(std::to_string(t.dim()) + " dimensions; the weight table holds at most " +
         std::to_string(shm::kMaxWeightDims));
  }
}

uint64_t span_of(const at::Tensor& t) {
  return shm::strided_span_bytes(static_cast<uint32_t>(t.dim()), t.sizes().data(), t.strides().data(),
                                 c10::elementSize(t.scalar_type()));
}

shm::WeightEntry make_entry(const ModuleTensor& m, uint64_t offset, uint64_t span) {
  shm::WeightEntry e{};  // zero-filled: the name's padding and unused dims are deterministic
  std::memcpy(e.name, m.name.data(), m.name.size());
  e.dtype = static_cast<int32_t>(m.tensor.scalar_type());
  e.element_bytes = static_cast<uint32_t>(c10::elementSize(m.tensor.scalar_type()));
  e.kind = static_cast<uint32_t>(m.kind);
  e.ndim = static_cast<uint32_t>(m.tensor.dim());
  for (uint32_t d = 0; d < e.ndim; ++d) {
    e.shape[d] = m.tensor.size(d);
    e.strides[d] = m.tensor.stride(d);
  }
  e.span_bytes = span;
  e.offset = offset;
  return e;
}

// Writes header, table and data; returns the checksum, also stored in the header.
// Copies each tensor's storage span from data_ptr(), so a non-contiguous
// tensor keeps its strides and needs no LibTorch op to be made contiguous.
uint64_t fill_segment(void* base, const shm::WeightLayout& layout, const std::vector<ModuleTensor>& tensors,
                      const std::vector<shm::WeightSpan>& spans) {
  const shm::WeightHeader header = shm::weight_header_for(layout);
  std::memcpy(base, &header, sizeof header);
  char* bytes = static_cast<char*>(base);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const shm::WeightEntry e = make_entry(tensors[i], layout.offsets[i], spans[i].bytes);
    std::memcpy(bytes + layout.table_offset + i * sizeof e, &e, sizeof e);
    if (e.span_bytes > 0) std::memcpy(bytes + e.offset, tensors[i].tensor.data_ptr(), e.span_bytes);
  }
  // The padding between tensors is whatever the fresh mapping held (zeros);
  // the checksum covers it as it is.
  const uint64_t checksum = shm::weight_checksum(base);
  shm::weight_header(base).checksum = checksum;
  return checksum;
}

// The view never owns or frees the memory. It is writable as far as LibTorch
// knows; the mapping is PROT_READ, so a write faults, which is the point.
at::Tensor view_of(const void* base, const shm::WeightEntry& e) {
  void* data = const_cast<char*>(static_cast<const char*>(base)) + e.offset;
  const auto options = at::TensorOptions().dtype(static_cast<at::ScalarType>(e.dtype)).device(at::kCPU);
  return torch::from_blob(data, at::IntArrayRef(e.shape, e.ndim), at::IntArrayRef(e.strides, e.ndim),
                          options);
}

// All views are made before any tensor changes, so a throw leaves the module as it was.
void rebind(const std::vector<ModuleTensor>& tensors, const std::vector<const shm::WeightEntry*>& entries,
            const void* base) {
  std::vector<at::Tensor> views;
  views.reserve(tensors.size());
  for (const shm::WeightEntry* e : entries) views.push_back(view_of(base, *e));
  // set_data swaps the TensorImpl's storage: the module's slot now reads the
  // segment and the heap copy is freed with its last reference.
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].tensor.set_data(views[i]);
}

std::string check_entry_matches(const ModuleTensor& m, const shm::WeightEntry& e) {
  if (e.kind != static_cast<uint32_t>(m.kind)) return "is a different kind (parameter/buffer) in the table";
  if (e.dtype < 0 || e.dtype >= static_cast<int32_t>(at::ScalarType::NumOptions) ||
      e.element_bytes != c10::elementSize(static_cast<at::ScalarType>(e.dtype))) {
    return "the table holds an unknown dtype code " + std::to_string(e.dtype);
  }
  const auto table_dtype = static_cast<at::ScalarType>(e.dtype);
  if (table_dtype != m.tensor.scalar_type()) {
    return std::string("dtype ") + c10::toString(m.tensor.scalar_type()) + ", the table has " +
           c10::toString(table_dtype);
  }
  const at::IntArrayRef table_shape(e.shape, e.ndim);
  if (table_shape != m.tensor.sizes()) {
    return "shape " + shape_text(m.tensor.sizes()) + ", the table has " + shape_text(table_shape);
  }
  return "";
}

// The table entry of every module tensor, in module order; throws on any mismatch.
std::vector<const shm::WeightEntry*> match_table(const std::vector<ModuleTensor>& tensors, const void* base) {
  const uint32_t count = shm::weight_header(base).entry_count;
  if (tensors.size() != count) {
    throw std::runtime_error("module has " + std::to_string(tensors.size()) +
                             " parameters and buffers, the weight table has " + std::to_string(count));
  }
  std::unordered_map<std::string, const shm::WeightEntry*> by_name;
  const shm::WeightEntry* table = shm::weight_entries(base);
  for (uint32_t i = 0; i < count; ++i) by_name.emplace(shm::entry_name(table[i]), &table[i]);
  std::vector<const shm::WeightEntry*> entries;
  for (const ModuleTensor& m : tensors) {
    auto it = by_name.find(m.name);
    if (it == by_name.end()) throw std::runtime_error(label(m) + ": not in the weight table");
    const std::string mismatch = check_entry_matches(m, *it->second);
    if (!mismatch.empty()) throw std::runtime_error(label(m) + ": " + mismatch);
    entries.push_back(it->second);
  }
  return entries;
}

}  // namespace

SharedWeights share_weights(const LoadedModel& model) {
  const std::vector<ModuleTensor> tensors = module_tensors(module_of(model));
  std::vector<shm::WeightSpan> spans;
  size_t weight_bytes = 0;
  for (const ModuleTensor& m : tensors) {
    check_shareable(m);
    spans.push_back({m.name, span_of(m.tensor)});
    weight_bytes += spans.back().bytes;
  }
  const shm::WeightLayout layout = shm::plan_weight_layout(spans);
  shm::Segment segment = shm::Segment::create(layout.total_bytes, "weights");
  const uint64_t checksum = fill_segment(segment.data(), layout, tensors, spans);
  // Sealed before any tensor points into it: no code path ever sees writable weights.
  if (const int rc = segment.protect_read_only(); rc != 0) {
    throw std::runtime_error(model.dir + ": cannot make the weight segment read-only: " + std::strerror(-rc));
  }
  std::vector<const shm::WeightEntry*> entries;
  for (size_t i = 0; i < tensors.size(); ++i) entries.push_back(&shm::weight_entries(segment.data())[i]);
  rebind(tensors, entries, segment.data());
  return SharedWeights{std::move(segment), weight_bytes, checksum, tensors.size()};
}

bool weights_already_shared(const LoadedModel& model) {
  const TorchModule& torch = torch_of(model);
  return torch.arena != nullptr && torch.optimized != "none";
}

std::string verify_shared_weights(const SharedWeights& weights) {
  const void* base = weights.segment.data();
  const std::string error = shm::verify_weight_segment(base, weights.segment.size());
  if (!error.empty()) return error;
  const shm::WeightHeader& h = shm::weight_header(base);
  // Self-consistent but not what share_weights() wrote: the whole segment was rewritten.
  if (h.checksum != weights.checksum || h.entry_count != weights.entries) {
    return "weight segment: header says " + std::to_string(h.entry_count) + " entries, checksum " +
           std::to_string(h.checksum) + "; share_weights() wrote " + std::to_string(weights.entries) +
           " entries, checksum " + std::to_string(weights.checksum);
  }
  return "";
}

void bind_to_table(const LoadedModel& model, const shm::Segment& segment) {
  const std::string error = shm::verify_weight_segment(segment.data(), segment.size());
  if (!error.empty()) throw std::runtime_error(model.dir + ": cannot bind to the weights: " + error);
  const std::vector<ModuleTensor> tensors = module_tensors(module_of(model));
  rebind(tensors, match_table(tensors, segment.data()), segment.data());
}

}  // namespace corepool
