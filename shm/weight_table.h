// The layout of the weight segment: a header, a table of entries (one per
// parameter or buffer: name, dtype, shape, strides, where its bytes are) and the
// 64-byte aligned data. Plain data plus the torch-free functions that size,
// check and checksum it; worker/shared_weights fills it and binds tensors to it.
// Everything here points into a mapping the caller owns and must keep alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace corepool::shm {

constexpr uint64_t kWeightMagic = 0x5448474945575043ULL;  // "CPWEIGHT" in a little-endian word
constexpr uint32_t kWeightVersion = 1;
constexpr size_t kWeightNameBytes = 200;  // including the terminating NUL
constexpr size_t kMaxWeightNameLength = kWeightNameBytes - 1;
constexpr uint32_t kMaxWeightDims = 8;
constexpr uint64_t kWeightAlign = 64;  // every tensor starts on its own cache line

enum class WeightKind : uint32_t { kParameter = 1, kBuffer = 2 };

// At offset 0 of the segment. Offsets count from the segment start, so the
// table means the same thing at whatever address a process maps it.
struct WeightHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t entry_count;
  uint64_t table_offset;  // entry_count WeightEntry records start here
  uint64_t data_offset;   // first tensor's bytes; 64-byte aligned
  uint64_t total_bytes;   // end of the data, 64-byte aligned (the segment may be larger)
  uint64_t checksum;      // weight_checksum() of [table_offset, total_bytes)
};

struct WeightEntry {
  char name[kWeightNameBytes];     // NUL-terminated, zero-padded: "conv1.weight"
  int32_t dtype;                   // c10::ScalarType as int; opaque to this file
  uint32_t element_bytes;          // so that spans can be checked without torch
  uint32_t kind;                   // WeightKind
  uint32_t ndim;                   // <= kMaxWeightDims
  int64_t shape[kMaxWeightDims];   // entries past ndim are 0
  int64_t strides[kMaxWeightDims]; // in elements, as the source tensor had them
  uint64_t span_bytes;             // bytes from the first element to past the last one
  uint64_t offset;                 // of the first element; 64-byte aligned
};

static_assert(std::is_trivially_copyable_v<WeightHeader> && std::is_standard_layout_v<WeightHeader>);
static_assert(std::is_trivially_copyable_v<WeightEntry> && std::is_standard_layout_v<WeightEntry>);
// Pinned sizes: changing either record means bumping kWeightVersion.
static_assert(sizeof(WeightHeader) == 48, "weight header layout changed: bump kWeightVersion");
static_assert(sizeof(WeightEntry) == 360, "weight entry layout changed: bump kWeightVersion");
static_assert(sizeof(WeightHeader) % alignof(WeightEntry) == 0, "the table follows the header");

// One tensor to place: what the caller knows before the segment exists.
struct WeightSpan {
  std::string name;
  uint64_t bytes = 0;
};

// Where each tensor of a list goes; plan_weight_layout() computes it.
struct WeightLayout {
  uint64_t table_offset = 0;
  uint64_t data_offset = 0;
  uint64_t total_bytes = 0;       // bytes the segment must have
  std::vector<uint64_t> offsets;  // one per span, in order
};

// Throws std::runtime_error naming the tensor if a name is empty or longer
// than kMaxWeightNameLength, or if the sizes overflow.
WeightLayout plan_weight_layout(const std::vector<WeightSpan>& spans);

// The header of a segment laid out as `layout`, checksum still 0.
WeightHeader weight_header_for(const WeightLayout& layout);

// Bytes covered by a strided tensor from its first element to past its last:
// what must be copied to keep every element. 0 for a tensor with no elements.
// Returns UINT64_MAX on a negative size/stride or on overflow.
uint64_t strided_span_bytes(uint32_t ndim, const int64_t* shape, const int64_t* strides,
                            uint64_t element_bytes);

// XXH64 (seed 0) of n bytes; reads 8-byte words in host byte order, which is
// fine for a checksum that never leaves the host.
uint64_t xxh64(const void* data, size_t n);

// The checksum of the table and the data of a segment whose header is valid: a
// flipped shape is as wrong as a flipped weight.
uint64_t weight_checksum(const void* base);

// Views of a mapping that holds a weight segment (base is page-aligned).
inline const WeightHeader& weight_header(const void* base) {
  return *static_cast<const WeightHeader*>(base);
}
inline WeightHeader& weight_header(void* base) { return *static_cast<WeightHeader*>(base); }
inline const WeightEntry* weight_entries(const void* base) {
  return reinterpret_cast<const WeightEntry*>(static_cast<const char*>(base) +
                                              weight_header(base).table_offset);
}
inline WeightEntry* weight_entries(void* base) {
  return reinterpret_cast<WeightEntry*>(static_cast<char*>(base) + weight_header(base).table_offset);
}

// The name of an entry whose name array may lack its NUL (a corrupt table).
inline std::string entry_name(const WeightEntry& e) {
  size_t n = 0;
  while (n < kWeightNameBytes && e.name[n] != '\0') ++n;
  return std::string(e.name, n);
}

// "" if the header at base is one of ours and every offset it holds lies in
// mapped_bytes; otherwise what is wrong. Does not read the entries.
std::string validate_header(const void* base, size_t mapped_bytes);

// "" if entry i of a segment with a valid header is well-formed and its bytes
// lie in the data area; otherwise what is wrong, naming the entry.
std::string validate_entry(const void* base, uint32_t i);

// validate_header, every validate_entry, then the checksum against the header.
std::string verify_weight_segment(const void* base, size_t mapped_bytes);

}  // namespace corepool::shm
