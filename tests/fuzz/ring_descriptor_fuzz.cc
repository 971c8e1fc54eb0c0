// libFuzzer target: a channel segment as a corrupted peer could leave it. The
// input becomes the layout parameters, the raw bytes of both rings (indices
// and descriptors) and the start of the slab; then both consumers drain their
// ring the way the worker (requests) and the supervisor (completions) do,
// through shm/descriptor_check.h. The slab is allocated at its exact size, so
// ASan stops any read outside it; a drain must end within N descriptors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "shm/channel.h"
#include "shm/descriptor_check.h"
#include "shm/ring.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using corepool::shm::ChannelData;
using corepool::shm::ChannelLayout;
using corepool::shm::kRingSlots;

// Takes `n` bytes from the input (zeros once it runs out) into `out`.
void take(const uint8_t*& data, size_t& size, void* out, size_t n) {
  const size_t k = n < size ? n : size;
  std::memset(out, 0, n);
  std::memcpy(out, data, k);
  data += k;
  size -= k;
}

uint32_t take_u32(const uint8_t*& data, size_t& size) {
  uint32_t v;
  take(data, size, &v, sizeof(v));
  return v;
}

// The worker's side: every request it would serve stays inside its slot.
void drain_requests(ChannelData& channel, const ChannelLayout& layout, const char* slab) {
  corepool::shm::RingConsumer<corepool::shm::RequestDesc, kRingSlots> requests(&channel.requests);
  uint32_t popped = 0;
  while (const corepool::shm::RequestDesc* r = requests.front()) {
    if (++popped > kRingSlots) corepool::fuzz::fail("more than N requests in one drain");
    if (corepool::shm::request_problem(*r, layout).empty()) {
      const auto* floats = reinterpret_cast<const float*>(slab + layout.slab.offset_of(r->slot));
      volatile float sum = 0;
      for (uint32_t i = 0; i < r->samples; ++i) sum = sum + floats[i];
    }
    requests.pop();
  }
}

// The supervisor's side: every completion decodes inside its slot.
void drain_completions(ChannelData& channel, const ChannelLayout& layout, const char* slab, uint32_t labels) {
  corepool::shm::RingConsumer<corepool::shm::CompletionDesc, kRingSlots> completions(&channel.completions);
  uint32_t popped = 0;
  while (const corepool::shm::CompletionDesc* c = completions.front()) {
    if (++popped > kRingSlots) corepool::fuzz::fail("more than N completions in one drain");
    corepool::shm::DecodedCompletion d = corepool::shm::decode_completion(*c, slab, layout, labels);
    if (d.problem.empty() && c->status == 0 && d.scores.size() != (c->floats == 0 ? labels : c->floats)) {
      corepool::fuzz::fail("a good completion without one score per label");
    }
    if (d.error.size() > corepool::shm::kErrorTextBytes) corepool::fuzz::fail("error text past its area");
    completions.pop();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Small models keep one run fast (a slab of at most ~330 KB): up to 1024
  // samples, 256 item floats, 256 labels. The checks scale with the layout.
  const uint32_t segment_samples = 1 + take_u32(data, size) % 1024;
  const uint32_t item_floats = 1 + take_u32(data, size) % 256;
  const uint32_t labels = 1 + take_u32(data, size) % 256;
  const ChannelLayout layout = ChannelLayout::for_model(segment_samples, item_floats, labels);

  void* memory = std::aligned_alloc(64, layout.total_bytes);
  if (memory == nullptr) corepool::fuzz::fail("aligned_alloc failed");
  auto* channel = new (memory) ChannelData();
  char* slab = static_cast<char*>(memory) + layout.slab_offset;
  // The peer's writes: indices and descriptors of both rings, then slab bytes.
  take(data, size, &channel->requests.head, sizeof(channel->requests.head));
  take(data, size, &channel->requests.tail, sizeof(channel->requests.tail));
  take(data, size, channel->requests.slots, sizeof(channel->requests.slots));
  take(data, size, &channel->completions.head, sizeof(channel->completions.head));
  take(data, size, &channel->completions.tail, sizeof(channel->completions.tail));
  take(data, size, channel->completions.slots, sizeof(channel->completions.slots));
  std::memset(slab, 0, layout.slab.total_bytes());
  std::memcpy(slab, data, size < layout.slab.total_bytes() ? size : layout.slab.total_bytes());

  drain_requests(*channel, layout, slab);
  drain_completions(*channel, layout, slab, labels);
  std::free(memory);  // ChannelData is trivially destructible
  return 0;
}
