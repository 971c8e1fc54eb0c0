// Input and output tensors in client shared memory. Every check runs before
// the first byte moves; the bytes move with pread/pwrite (ClientShmRegion).
#include "supervisor/triton/client_shm_io.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

namespace corepool::triton {
namespace {

constexpr const char* kInput = "inputs[0]";
constexpr const char* kOutput = "outputs[0]";

Status invalid(std::string message) { return Status{Code::kInvalidArgument, std::move(message)}; }

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Said before anything else about the request: no other check matters then.
Status check_allowed(const ClientShmRegistry& registry, const std::string& where) {
  if (registry.allowed()) return {};
  return {Code::kPermissionDenied,
          where + ".parameters.shared_memory_region: system shared memory is disabled (serve.allow_client_shm = false)"};
}

// The region `ref` names, with [ref.offset, + ref.byte_size) inside it.
Result<std::shared_ptr<const ClientShmRegion>> region_of(const ClientShmRegistry& registry, const ShmRef& ref,
                                                         const std::string& where) {
  auto region = registry.find(ref.region);
  if (!region) {
    return {{Code::kNotFound, where + ".parameters.shared_memory_region: no region " + quoted(ref.region) +
                                  " is registered"},
            nullptr};
  }
  if (Status s = region->check_range(ref.offset, ref.byte_size); !s.ok()) {
    return {invalid(where + ".parameters.shared_memory_offset/shared_memory_byte_size: " + s.message), nullptr};
  }
  return {{}, std::move(region)};
}

}  // namespace

Result<oip::InferRequest> read_shm_input(const ClientShmRegistry& registry, const oip::TensorHeader& header,
                                         const ShmRef& ref, const ModelConfig& model, int64_t max_batch,
                                         std::string id) {
  if (Status s = check_allowed(registry, kInput); !s.ok()) return {s, {}};
  int64_t batch = 0;
  try {
    batch = oip::check_tensor_header(header, model, max_batch, kInput);
  } catch (const oip::ProtocolError& e) {
    return {invalid(e.what()), {}};
  }
  const uint64_t item_bytes = static_cast<uint64_t>(model.item_floats()) * sizeof(float);
  const uint64_t want = static_cast<uint64_t>(batch) * item_bytes;
  if (ref.byte_size != want) {
    return {invalid(std::string(kInput) + ".parameters.shared_memory_byte_size: " + std::to_string(ref.byte_size) +
                    " bytes, the shape " + shape_text(header.shape) + " needs " + std::to_string(want) + " (FP32)"),
            {}};
  }
  auto region = region_of(registry, ref, kInput);
  if (!region.status.ok()) return {region.status, {}};

  oip::InferRequest out;
  out.id = std::move(id);
  out.batch = batch;
  out.items.assign(batch, std::vector<float>(model.item_floats()));
  for (int64_t b = 0; b < batch; ++b) {  // straight into each item's storage
    Status s = region.value->read(ref.offset + b * item_bytes, item_bytes, out.items[b].data());
    if (!s.ok()) return {{s.code, std::string(kInput) + ": " + s.message}, {}};
    for (size_t i = 0; i < out.items[b].size(); ++i) {
      if (!std::isfinite(out.items[b][i])) {
        return {invalid(std::string(kInput) + ": element " + std::to_string(b * model.item_floats() + i) +
                        " is not finite (region " + quoted(ref.region) + ")"),
                {}};
      }
    }
  }
  return {{}, std::move(out)};
}

Result<ShmOutput> prepare_shm_output(const ClientShmRegistry& registry, const ShmRef& ref, int64_t batch,
                                     const ModelConfig& model) {
  if (Status s = check_allowed(registry, kOutput); !s.ok()) return {s, {}};
  const int64_t labels = static_cast<int64_t>(model.labels.size());
  const uint64_t want = static_cast<uint64_t>(batch) * labels * sizeof(float);
  if (ref.byte_size != want) {
    return {invalid(std::string(kOutput) + ".parameters.shared_memory_byte_size: " + std::to_string(ref.byte_size) +
                    " bytes, the scores [" + std::to_string(batch) + ", " + std::to_string(labels) + "] need " +
                    std::to_string(want) + " (FP32)"),
            {}};
  }
  auto region = region_of(registry, ref, kOutput);
  if (!region.status.ok()) return {region.status, {}};
  return {{}, ShmOutput{std::move(region.value), ref, batch, labels}};
}

Status write_shm_output(const ShmOutput& output, const std::vector<std::vector<float>>& scores) {
  if (!output.region) return {Code::kInternal, std::string(kOutput) + ": no region prepared"};
  bool shaped = static_cast<int64_t>(scores.size()) == output.batch;
  for (size_t b = 0; shaped && b < scores.size(); ++b) shaped = static_cast<int64_t>(scores[b].size()) == output.labels;
  if (!shaped) {
    return {Code::kInternal, std::string(kOutput) + ": the model's scores are not [" + std::to_string(output.batch) +
                                 ", " + std::to_string(output.labels) + "]"};
  }
  // One pwrite for the whole tensor rather than one per row (scores are
  // small: batch x labels).
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(output.batch * output.labels));
  for (const auto& row : scores) flat.insert(flat.end(), row.begin(), row.end());
  Status s = output.region->write(output.ref.offset, flat.size() * sizeof(float), flat.data());
  if (!s.ok()) return {s.code, std::string(kOutput) + ": " + s.message};
  return {};
}

}  // namespace corepool::triton
