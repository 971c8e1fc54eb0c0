// Sizing, checking and checksumming of the weight segment. Torch-free: the
// supervisor may call any of it before it forks. Every check is written so that
// a corrupt table can make it fail but never make it read outside the mapping.
#include "shm/weight_table.h"

#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace corepool::shm {
namespace {

constexpr uint64_t kNoSpan = std::numeric_limits<uint64_t>::max();

// False on overflow.
bool align_up(uint64_t v, uint64_t* out) {
  if (v > kNoSpan - (kWeightAlign - 1)) return false;
  *out = (v + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
  return true;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string entry_label(const WeightEntry& e, uint32_t i) {
  return "weight segment: entry " + std::to_string(i) + " ('" + entry_name(e) + "')";
}

std::string check_span(const WeightHeader& h, const WeightEntry& e) {
  const uint64_t expected = strided_span_bytes(e.ndim, e.shape, e.strides, e.element_bytes);
  if (expected == kNoSpan) return "shape or strides are negative or overflow";
  if (e.span_bytes != expected) {
    return "span of " + std::to_string(e.span_bytes) + " bytes, its shape and strides need " +
           std::to_string(expected);
  }
  if (e.offset % kWeightAlign != 0) return "offset " + std::to_string(e.offset) + " is not 64-byte aligned";
  // Subtractions rather than offset + span: a corrupt offset must not wrap around.
  if (e.offset < h.data_offset || e.offset > h.total_bytes || e.span_bytes > h.total_bytes - e.offset) {
    return "bytes [" + std::to_string(e.offset) + ", +" + std::to_string(e.span_bytes) +
           ") lie outside the data area [" + std::to_string(h.data_offset) + ", " +
           std::to_string(h.total_bytes) + ")";
  }
  return "";
}

// XXH64 as published (github.com/Cyan4973/xxHash); the tests pin its values.
constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL, kP2 = 0xC2B2AE3D27D4EB4FULL,
                   kP3 = 0x165667B19E3779F9ULL, kP4 = 0x85EBCA77C2B2AE63ULL,
                   kP5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t read64(const unsigned char* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }
inline uint32_t read32(const unsigned char* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline uint64_t xxh_round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }
inline uint64_t xxh_merge(uint64_t acc, uint64_t v) { return (acc ^ xxh_round(0, v)) * kP1 + kP4; }

// Four independent lanes over 32-byte stripes: the loop runs at memory speed.
uint64_t xxh64_stripes(const unsigned char*& p, const unsigned char* end) {
  uint64_t v1 = kP1 + kP2, v2 = kP2, v3 = 0, v4 = 0 - kP1;
  for (; end - p >= 32; p += 32) {
    v1 = xxh_round(v1, read64(p));
    v2 = xxh_round(v2, read64(p + 8));
    v3 = xxh_round(v3, read64(p + 16));
    v4 = xxh_round(v4, read64(p + 24));
  }
  uint64_t h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
  return xxh_merge(xxh_merge(xxh_merge(xxh_merge(h, v1), v2), v3), v4);
}

}  // namespace

WeightLayout plan_weight_layout(const std::vector<WeightSpan>& spans) {
  if (spans.size() > std::numeric_limits<uint32_t>::max()) {
    throw std::runtime_error("weight table: " + std::to_string(spans.size()) + " tensors is too many");
  }
  WeightLayout layout;
  layout.table_offset = sizeof(WeightHeader);
  if (!align_up(layout.table_offset + spans.size() * sizeof(WeightEntry), &layout.data_offset)) {
    throw std::runtime_error("weight table: size overflows");
  }
  uint64_t pos = layout.data_offset;
  for (const WeightSpan& s : spans) {
    if (s.name.empty() || s.name.size() > kMaxWeightNameLength) {
      throw std::runtime_error("weight '" + s.name + "': name is " + std::to_string(s.name.size()) +
                               " bytes; the weight table holds names of 1 to " +
                               std::to_string(kMaxWeightNameLength) + " bytes");
    }
    layout.offsets.push_back(pos);
    if (s.bytes > kNoSpan - pos || !align_up(pos + s.bytes, &pos)) {
      throw std::runtime_error("weight '" + s.name + "': segment size overflows");
    }
  }
  layout.total_bytes = pos;
  return layout;
}

WeightHeader weight_header_for(const WeightLayout& layout) {
  WeightHeader h{};
  h.magic = kWeightMagic;
  h.version = kWeightVersion;
  h.entry_count = static_cast<uint32_t>(layout.offsets.size());
  h.table_offset = layout.table_offset;
  h.data_offset = layout.data_offset;
  h.total_bytes = layout.total_bytes;
  return h;
}

uint64_t strided_span_bytes(uint32_t ndim, const int64_t* shape, const int64_t* strides,
                            uint64_t element_bytes) {
  if (ndim > kMaxWeightDims) return kNoSpan;
  bool empty = false;
  uint64_t last = 0;  // index of the last element, in elements
  for (uint32_t d = 0; d < ndim; ++d) {
    if (shape[d] < 0 || strides[d] < 0) return kNoSpan;
    if (shape[d] == 0) empty = true;
    uint64_t step = 0;
    if (shape[d] > 0 && (__builtin_mul_overflow(static_cast<uint64_t>(shape[d] - 1),
                                                static_cast<uint64_t>(strides[d]), &step) ||
                         __builtin_add_overflow(last, step, &last))) {
      return kNoSpan;
    }
  }
  if (empty) return 0;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(last + 1, element_bytes, &bytes)) return kNoSpan;
  return bytes;
}

uint64_t xxh64(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + n;
  uint64_t h = n >= 32 ? xxh64_stripes(p, end) : kP5;
  h += n;
  for (; end - p >= 8; p += 8) h = rotl(h ^ xxh_round(0, read64(p)), 27) * kP1 + kP4;
  if (end - p >= 4) {
    h = rotl(h ^ (uint64_t{read32(p)} * kP1), 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * kP5), 11) * kP1;
  h = (h ^ (h >> 33)) * kP2;
  h = (h ^ (h >> 29)) * kP3;
  return h ^ (h >> 32);
}

uint64_t weight_checksum(const void* base) {
  const WeightHeader& h = weight_header(base);
  return xxh64(static_cast<const char*>(base) + h.table_offset, h.total_bytes - h.table_offset);
}

std::string validate_header(const void* base, size_t mapped_bytes) {
  if (mapped_bytes < sizeof(WeightHeader)) {
    return "weight segment: " + std::to_string(mapped_bytes) + " bytes is smaller than its header";
  }
  const WeightHeader& h = weight_header(base);
  if (h.magic != kWeightMagic) return "weight segment: bad magic " + hex(h.magic) + ", not a weight segment";
  if (h.version != kWeightVersion) {
    return "weight segment: version " + std::to_string(h.version) + ", this build reads version " +
           std::to_string(kWeightVersion);
  }
  if (h.table_offset < sizeof(WeightHeader) || h.table_offset % alignof(WeightEntry) != 0 ||
      h.table_offset > h.data_offset ||
      (h.data_offset - h.table_offset) / sizeof(WeightEntry) < h.entry_count) {
    return "weight segment: a table of " + std::to_string(h.entry_count) + " entries at offset " +
           std::to_string(h.table_offset) + " does not fit before the data at " +
           std::to_string(h.data_offset);
  }
  if (h.data_offset % kWeightAlign != 0 || h.data_offset > h.total_bytes || h.total_bytes > mapped_bytes) {
    return "weight segment: data [" + std::to_string(h.data_offset) + ", " + std::to_string(h.total_bytes) +
           ") is misaligned or does not fit in the " + std::to_string(mapped_bytes) + " mapped bytes";
  }
  return "";
}

std::string validate_entry(const void* base, uint32_t i) {
  const WeightHeader& h = weight_header(base);
  const WeightEntry& e = weight_entries(base)[i];
  if (std::memchr(e.name, '\0', kWeightNameBytes) == nullptr || e.name[0] == '\0') {
    return entry_label(e, i) + ": name is empty or not NUL-terminated";
  }
  if (e.kind != static_cast<uint32_t>(WeightKind::kParameter) &&
      e.kind != static_cast<uint32_t>(WeightKind::kBuffer)) {
    return entry_label(e, i) + ": unknown kind " + std::to_string(e.kind);
  }
  if (e.ndim > kMaxWeightDims) {
    return entry_label(e, i) + ": " + std::to_string(e.ndim) + " dimensions, at most " +
           std::to_string(kMaxWeightDims);
  }
  if (e.element_bytes == 0 || e.element_bytes > 16 || (e.element_bytes & (e.element_bytes - 1)) != 0) {
    return entry_label(e, i) + ": element size " + std::to_string(e.element_bytes);
  }
  const std::string span_error = check_span(h, e);
  return span_error.empty() ? "" : entry_label(e, i) + ": " + span_error;
}

std::string verify_weight_segment(const void* base, size_t mapped_bytes) {
  std::string error = validate_header(base, mapped_bytes);
  for (uint32_t i = 0; error.empty() && i < weight_header(base).entry_count; ++i) {
    error = validate_entry(base, i);
  }
  if (!error.empty()) return error;
  const uint64_t actual = weight_checksum(base);
  if (actual != weight_header(base).checksum) {
    return "weight segment: checksum " + hex(actual) + " does not match " +
           hex(weight_header(base).checksum) + " recorded when the weights were shared";
  }
  return "";
}

}  // namespace corepool::shm
