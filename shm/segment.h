// A segment: one zero-filled MAP_SHARED mapping that the supervisor creates
// before fork() and every worker inherits (weights, rings, slabs). Its
// /dev/shm name is removed right after mapping, so nothing outlives the
// processes that map it; sweep_dead_segments() covers a supervisor killed
// between create and remove. The Segment object owns the mapping (unmapped on
// destruction, in each process separately); a forked child keeps its copy.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include <boost/interprocess/mapped_region.hpp>

namespace corepool::shm {

class Segment {
 public:
  // Creates /dev/shm/corepool.<pid>.<seq>.<purpose> of `bytes` bytes (create
  // only, read-write), maps it and removes the name. `purpose` says what the
  // segment is for ("weights", "rings"): letters, digits, '_', '-', '.'.
  // Throws std::runtime_error with context when the system refuses, and
  // std::invalid_argument for a zero size or a bad purpose.
  static Segment create(std::size_t bytes, const std::string& purpose);

  Segment() = default;  // empty: data() == nullptr, size() == 0
  Segment(Segment&& other) noexcept { region_.swap(other.region_); }
  Segment& operator=(Segment&& other) noexcept {
    Segment old(std::move(other));  // unmaps our previous mapping on return
    region_.swap(old.region_);
    return *this;
  }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  void* data() const { return region_.get_address(); }
  std::size_t size() const { return region_.get_size(); }

  // mprotect() over the whole mapping, in this process only (a child forked
  // afterwards inherits the protection). Return 0 or -errno.
  int protect_read_only();
  int protect_read_write();

 private:
  explicit Segment(boost::interprocess::mapped_region&& region) { region_.swap(region); }

  boost::interprocess::mapped_region region_;
};

// Removes files named corepool.<pid>.* in `shm_dir` whose process is gone
// (kill(pid, 0) says ESRCH): segments of a supervisor SIGKILLed between
// create and remove. Call once at supervisor start. Returns how many files it
// removed, or -errno when `shm_dir` cannot be read.
int sweep_dead_segments(const std::string& shm_dir = "/dev/shm");

}  // namespace corepool::shm
