// SoundFile: one libsndfile read handle over a path or a buffer. The buffer is
// served through SF_VIRTUAL_IO with the semantics of a read-only regular file
// (lseek/read/fstat): seeking past the end is allowed and reads there return 0,
// a seek before the start fails and leaves the position alone.
#include "audio/audio_source.h"

#include <sndfile.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

namespace corepool {
namespace {

BufferCursor& cursor_of(void* user_data) { return *static_cast<BufferCursor*>(user_data); }

sf_count_t buffer_length(void* user_data) { return sf_count_t(cursor_of(user_data).bytes.size()); }

sf_count_t buffer_seek(sf_count_t offset, int whence, void* user_data) {
  BufferCursor& c = cursor_of(user_data);
  sf_count_t base = 0;
  if (whence == SEEK_CUR) base = c.pos;
  else if (whence == SEEK_END) base = sf_count_t(c.bytes.size());
  else if (whence != SEEK_SET) return -1;
  // A damaged header can ask for any offset: no signed overflow, no negative position.
  if (offset > 0 && base > std::numeric_limits<sf_count_t>::max() - offset) return -1;
  if (base + offset < 0) return -1;
  c.pos = base + offset;
  return c.pos;
}

sf_count_t buffer_read(void* out, sf_count_t count, void* user_data) {
  BufferCursor& c = cursor_of(user_data);
  const sf_count_t size = sf_count_t(c.bytes.size());
  if (count <= 0 || c.pos >= size) return 0;
  const sf_count_t n = std::min(count, size - c.pos);
  std::memcpy(out, c.bytes.data() + c.pos, size_t(n));
  c.pos += n;
  return n;
}

sf_count_t buffer_write(const void*, sf_count_t, void*) { return 0; }  // read-only

sf_count_t buffer_tell(void* user_data) { return cursor_of(user_data).pos; }

// Static: libsndfile may keep the pointer for the life of every handle.
SF_VIRTUAL_IO kBufferIo = {buffer_length, buffer_seek, buffer_read, buffer_write, buffer_tell};

}  // namespace

SoundFile::SoundFile(const AudioSource& source, SF_INFO& info) {
  info = SF_INFO{};
  if (source.in_memory) {
    cursor_.bytes = source.bytes;
    file_ = sf_open_virtual(&kBufferIo, SFM_READ, &info, &cursor_);
  } else {
    file_ = sf_open(source.name.c_str(), SFM_READ, &info);
  }
  if (!file_) {
    error_ = sf_error(nullptr);
    error_text_ = sf_strerror(nullptr);
  }
}

SoundFile::~SoundFile() {
  if (file_) sf_close(file_);
}

}  // namespace corepool
