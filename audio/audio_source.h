// Where encoded audio comes from: a file on disk (batch) or a buffer in memory
// (serve: a request body). SoundFile is libsndfile's read handle on either,
// sf_open for a path and sf_open_virtual over the buffer, so that validation and
// decoding after the open are one code path. Used by audio_validation and
// AudioStream. A buffer must outlive every SoundFile opened on it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

typedef struct sf_private_tag SNDFILE;
struct SF_INFO;

namespace corepool {

struct AudioSource {
  std::string name;        // the path, or what messages call the buffer ("request body")
  bool in_memory = false;  // true: `bytes` is the file; an empty buffer is still a buffer
  std::string_view bytes;  // not owned

  static AudioSource file(const std::string& path) { return {path, false, {}}; }
  static AudioSource memory(const std::string& name, std::string_view bytes) {
    return {name, true, bytes};
  }
};

// The read position of libsndfile's virtual I/O in a buffer.
struct BufferCursor {
  std::string_view bytes;
  int64_t pos = 0;
};

class SoundFile {
 public:
  // Opens `source` for reading and fills `info`. Never throws: on failure get()
  // is null and error() / error_text() hold libsndfile's reason, copied at once
  // because libsndfile keeps the reason of a failed open in one global.
  SoundFile(const AudioSource& source, SF_INFO& info);
  ~SoundFile();
  // Not movable either: libsndfile holds the address of cursor_.
  SoundFile(const SoundFile&) = delete;
  SoundFile& operator=(const SoundFile&) = delete;

  SNDFILE* get() const { return file_; }
  int error() const { return error_; }  // an SF_ERR_* / libsndfile error number
  const std::string& error_text() const { return error_text_; }

 private:
  BufferCursor cursor_;
  SNDFILE* file_ = nullptr;
  int error_ = 0;
  std::string error_text_;
};

}  // namespace corepool
