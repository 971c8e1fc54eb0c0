// Stage 2a's first half: one audio stream of an open MediaInput, decoded
// packet by packet (libavcodec) into interleaved float frames. Owns the input,
// the codec context and one packet and one frame, so memory is one packet's
// worth whatever the file's length. A packet the codec refuses, or a stretch the
// demuxer skipped over (a timestamp jump), costs that stretch: it comes out as
// silence of the same length, so later events keep their times, and is listed
// in skipped(). Owned by one AudioStream; one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio/audio_source.h"

struct AVCodecContext;
struct AVFrame;
struct AVPacket;
struct AVStream;

namespace corepool {

// A stretch of the file that could not be decoded: in the middle it came out
// as silence (so what follows keeps its time); at the end nothing follows it.
struct SkippedStretch {
  double at_seconds = 0;  // from the start of the audio
  double seconds = 0;
  bool at_end = false;    // the last packet(s), refused: dropped, not filled
};

class AudioDecoder {
 public:
  // Opens audio stream `audio_index` (0 = the first audio stream) of `input`.
  // Throws AudioError naming `name`: no audio stream, no such audio stream
  // ("... has 2 audio streams"), or a codec FFmpeg cannot decode.
  AudioDecoder(std::unique_ptr<MediaInput> input, std::string name, int audio_index, bool in_memory);
  ~AudioDecoder();
  AudioDecoder(const AudioDecoder&) = delete;
  AudioDecoder& operator=(const AudioDecoder&) = delete;

  const AVStream& stream() const { return *stream_; }
  const MediaInput& input() const { return *input_; }
  // Channels of every frame read() appends (the stream's; a change mid-stream throws).
  int channels() const { return channels_; }
  // The rate of the decoded frames (0 until the first read(); HE-AAC decodes at
  // twice the rate its header states).
  int decoded_rate() const { return rate_; }

  // Appends the next frames (interleaved float, channels() per frame) to `out`:
  // a decoded frame or up to kMaxGapChunk frames of silence standing for a
  // skipped stretch. Returns the frames appended; 0 only at the end. Throws
  // AudioError on a read error of a file (kIo) or a rate/channel change.
  size_t read(std::vector<float>& out);

  // True once read() has returned 0 and the data ended in damage (a partial or
  // corrupt last packet, a demuxer error) rather than at a clean end. A whole
  // last packet that the codec refuses is not this: it is listed in skipped().
  bool ended_damaged() const { return ended_damaged_; }
  const std::string& end_reason() const { return end_reason_; }
  const std::vector<SkippedStretch>& skipped() const { return skipped_; }

 private:
  void select_stream(int audio_index);
  void open_codec();
  bool feed();  // one packet of our stream into the codec; false at the end of the data
  bool whole_frames_on_pipe(const AVPacket& packet) const;  // a short last PCM packet, not damage
  void remember_packet();
  void note_undecodable();
  void list_refused_end();
  void account(const AVFrame& frame);  // timestamps -> gaps
  size_t append_frame(std::vector<float>& out);
  size_t append_gap(std::vector<float>& out);
  double seconds(int64_t samples) const { return rate_ > 0 ? double(samples) / rate_ : 0.0; }

  std::string name_;
  bool in_memory_;
  // Each FFmpeg object frees itself: the constructor throws halfway through
  // (a codec that will not open), when no destructor runs.
  struct FreeCodec { void operator()(AVCodecContext* c) const; };
  struct FreePacket { void operator()(AVPacket* p) const; };
  struct FreeFrame { void operator()(AVFrame* f) const; };

  std::unique_ptr<MediaInput> input_;
  AVStream* stream_ = nullptr;  // owned by input_
  std::unique_ptr<AVCodecContext, FreeCodec> codec_holder_;
  std::unique_ptr<AVPacket, FreePacket> packet_holder_;
  std::unique_ptr<AVFrame, FreeFrame> frame_holder_;
  AVCodecContext* codec_ = nullptr;  // the holders' pointers, for brevity
  AVPacket* packet_ = nullptr;
  AVFrame* frame_ = nullptr;
  int channels_ = 0;
  int rate_ = 0;
  bool draining_ = false;
  bool ended_ = false;
  bool ended_damaged_ = false;
  std::string end_reason_;
  // Timestamps, in samples at rate_: where the next frame should start.
  bool started_ = false;
  int64_t first_ts_ = 0;
  int64_t next_ts_ = 0;
  int64_t last_frame_samples_ = 0;  // the previous frame's length: timestamp jitter stays below it
  int64_t gap_left_ = 0;              // silence still to append for a skipped stretch
  bool error_pending_ = false;        // the codec refused a packet since the last frame
  double error_at_ = 0;               // the first such packet's time, seconds from the start
  int64_t error_samples_ = 0;         // their estimated length, in samples at rate_
  double packet_at_ = 0;              // the last packet sent: its time
  int64_t packet_samples_ = 0;        // and estimated length
  std::vector<SkippedStretch> skipped_;
  std::vector<float> refold_;  // a frame whose channel count differs from the stream's, before folding
};

}  // namespace corepool
