// The shared-memory channel between the supervisor and ONE worker process:
// control words (state, heartbeat, stop), a request ring (supervisor -> worker),
// a completion ring (worker -> supervisor) and the payload slab whose slots
// carry PCM (or one item of model input) in and scores (or an error text) out.
// Plain data: it lives in a Segment created by the supervisor before fork and
// is re-initialised for each replacement worker after the previous one has
// been reaped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "shm/ring.h"
#include "shm/slab.h"

namespace corepool::shm {

// Supervisor -> worker: run the segment in `slot` (samples floats of PCM, or
// of model input with kModelInput).
struct RequestDesc {
  uint64_t request = 0;  // supervisor's request id (never reused)
  uint32_t slot = 0;     // slab slot holding the input; the result goes there too
  uint32_t samples = 0;  // floats of input at the start of the slot
  uint32_t flags = 0;    // kRunAlone | kModelInput | kSplitFront | kSplitSequence
  uint32_t reserved = 0;
};

constexpr uint32_t kRunAlone = 1;    // a crash suspect: run it in a batch of its own
constexpr uint32_t kModelInput = 2;  // the floats go to forward() as is, no feature step
constexpr uint32_t kSplitFront = 4;     // a split model's front of one chunk (TaskInput::kSplitFront)
constexpr uint32_t kSplitSequence = 8;  // a split model's sequence of one stream (TaskInput::kSplitSequence)

// Worker -> supervisor: the request in `slot` is done.
struct CompletionDesc {
  uint64_t request = 0;
  uint32_t slot = 0;
  int32_t status = 0;    // 0: `labels` floats of scores follow the PCM; else an error text
  // Status 0: how many floats the result holds, at most the layout's result
  // floats; 0 = exactly those (every kind but a split's, whose sizes vary).
  uint32_t floats = 0;
  uint32_t reserved = 0;
};

// Worker -> supervisor, in the slot next to the result: where the request's
// time went (Triton's statistics). CLOCK_MONOTONIC is one clock for every
// process, so the supervisor turns taken_ns into queue time with its own
// submit time. Written before the completion is pushed (a release).
struct SlotTiming {
  int64_t taken_ns = 0;     // the worker popped the request from its ring
  uint64_t input_ns = 0;    // its batch's features and copy-in
  uint64_t infer_ns = 0;    // its batch's forward()
  uint64_t output_ns = 0;   // its batch's copy-out into the slots
  uint32_t batch = 0;       // requests in that forward()
  uint32_t batch_pos = 0;   // this one's place in it
};

static_assert(std::is_trivially_copyable_v<RequestDesc>);
static_assert(std::is_trivially_copyable_v<CompletionDesc>);
static_assert(std::is_trivially_copyable_v<SlotTiming>);

// How far a worker has come, as it writes it into its control block (the
// supervisor's own, fuller view of a slot is pool::WorkerState).
enum class BootState : uint32_t { kEmpty = 0, kStarting = 1, kReady = 2, kStopping = 3 };

// A worker's slab holds two full batches, so that one batch runs while the
// next waits full in the ring: with one batch's worth of slots (64 and 64
// until issue 39), Silero's streams settled in two groups per worker, each
// waiting while the other ran, and process mode's batches stayed half full.
// The slab has at most kRingSlots slots (ChannelLayout::for_model), never
// more: a push never finds a full ring.
constexpr uint32_t kMaxBatch = 256;               // places in WorkerControl::running
constexpr uint32_t kRingSlots = 2 * kMaxBatch;    // descriptors per ring
// Slab slots: two batches, at least kMinSlabSlots (what every model had
// before), at most kRingSlots, and past kMinSlabSlots no more than fit
// kSlabBudgetBytes: Segment::create() reserves the whole slab in /dev/shm,
// and 512 slots of 1 s of 16 kHz PCM (64 KB each) would be 33 MB a worker.
// 8 MB: Silero's 4.4 KB slots get all 512 at batch 256 (2.3 MB), 1 s of
// 16 kHz audio 128 at batch 64 (8.2 MB, its model.toml's limit) and 130 at
// most; a batch of 32 or less keeps the 64 slots (4.1 MB) it always had.
constexpr uint64_t kSlabBudgetBytes = uint64_t{8} << 20;
constexpr uint32_t kMinSlabSlots = 64;
constexpr uint32_t kErrorTextBytes = 256;

struct alignas(kCacheLine) WorkerControl {
  std::atomic<uint32_t> state{0};         // BootState, written by the worker
  std::atomic<uint32_t> stop{0};          // written by the supervisor: finish and exit 0
  std::atomic<int32_t> pid{0};
  alignas(kCacheLine) std::atomic<int64_t> heartbeat_ns{0};  // CLOCK_MONOTONIC, written by the worker
  // Written by the worker before it pushes a batch's completions, so a reader
  // that has seen a completion sees it counted. Lost with the channel when the
  // slot is re-initialised: the supervisor keeps the sum of the dead workers'.
  std::atomic<uint64_t> busy_ns{0};       // time in features + forward()
  std::atomic<uint64_t> batches{0};       // forward() calls
  std::atomic<uint64_t> segments{0};      // segments they ran
  // The requests of the batch inside forward() right now, written by the worker
  // before it starts and cleared after: if the worker crashes, these (and only
  // these) are suspects of a poison input; the rest of its queue is innocent.
  std::atomic<uint32_t> running_count{0};      // at most kMaxBatch
  std::atomic<uint64_t> running[kMaxBatch]{};
};

struct ChannelData {
  WorkerControl control;
  RingData<RequestDesc, kRingSlots> requests;
  RingData<CompletionDesc, kRingSlots> completions;
  // The slab follows at ChannelLayout::slab_offset.
};

static_assert(std::is_standard_layout_v<WorkerControl>);
static_assert(kMaxBatch <= kRingSlots, "a batch must fit in one request ring");
static_assert(kMinSlabSlots <= kRingSlots, "a slab never has more slots than a ring");

// Where things are in a channel segment for a model with `segment_samples`
// floats of PCM per segment, `item_floats` floats of model input per item and
// `labels` result floats per item (one score per label; a stateful model's
// tasks and results also carry the stream's state, so the caller passes its
// task and result sizes) and batches of at most `max_batch` requests. A slot's
// input area holds the larger of the two inputs. The slab has 2 x max_batch
// slots within [kMinSlabSlots, kRingSlots], and no more than fit
// kSlabBudgetBytes unless that is under kMinSlabSlots; the default max_batch
// gives the most slots the model can have (and so its largest batch_limit()).
struct ChannelLayout {
  SlabLayout slab{};
  uint64_t slab_offset = 0;
  uint64_t total_bytes = 0;
  uint32_t result_offset = 0;  // within a slot: scores or error text start here;
                               // the input area before it holds this / 4 floats
  uint32_t timing_offset = 0;  // within a slot: the SlotTiming, after the result area

  // The most requests one forward() may take: a batch holds slots and its
  // requests are listed in WorkerControl::running. A batch of at most half
  // the slots leaves room for a full next one in the ring.
  uint32_t batch_limit() const { return std::min(kMaxBatch, slab.slot_count); }

  static ChannelLayout for_model(uint32_t segment_samples, uint32_t item_floats, uint32_t labels,
                                 uint32_t max_batch = kMaxBatch) {
    // Cache-line boundaries: the result area never shares a line with the
    // input, nor the slab with the rings.
    auto round_up = [](uint64_t v) { return (v + kCacheLine - 1) / kCacheLine * kCacheLine; };
    ChannelLayout l;
    const uint64_t input_floats = std::max(segment_samples, item_floats);
    l.result_offset = static_cast<uint32_t>(round_up(input_floats * sizeof(float)));
    const uint64_t result_bytes = std::max<uint64_t>(uint64_t{labels} * sizeof(float), kErrorTextBytes);
    l.timing_offset = static_cast<uint32_t>((l.result_offset + result_bytes + 7) / 8 * 8);
    const SlabLayout one = make_slab_layout(1, l.timing_offset + sizeof(SlotTiming));
    const uint64_t fit = std::max<uint64_t>(kSlabBudgetBytes / one.slot_bytes, kMinSlabSlots);
    const uint64_t two_batches = std::clamp<uint64_t>(uint64_t{2} * max_batch, kMinSlabSlots, kRingSlots);
    const auto slots = static_cast<uint32_t>(std::min(fit, two_batches));
    l.slab = make_slab_layout(slots, one.slot_bytes);
    l.slab_offset = round_up(sizeof(ChannelData));
    l.total_bytes = l.slab_offset + l.slab.total_bytes();
    return l;
  }
};

}  // namespace corepool::shm
