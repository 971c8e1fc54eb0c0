// AudioDecoder: demux -> decode -> float, with damage turned into counted
// silence. The gap rule works from timestamps, so it covers both ways a damaged
// stretch shows: the codec refuses a packet (send/receive fails), or the
// demuxer resynchronises past garbage (an MP3 frame header destroyed) and the
// next frame simply starts later than the last one ended. Codec threads are
// off (thread_count 1): no thread of FFmpeg's outlives a read(), so a process
// may fork after decoding.
#include "audio/audio_decoder.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/samplefmt.h>
}

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

#include "audio/audio_error.h"

namespace corepool {
namespace {

// One append of silence at most, so a long skipped stretch costs no memory.
constexpr int64_t kMaxGapChunk = 4096;
// A jump further than this is a broken timestamp, not lost audio: not filled.
constexpr double kMaxGapSeconds = 600;
// A capture device with nothing yet is asked again this often: a small part
// of one ALSA period (1024 frames at 48 kHz are 21 ms).
constexpr auto kDeviceWait = std::chrono::milliseconds(5);

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

template <typename T>
float to_float(T v);
template <> float to_float(uint8_t v) { return (float(v) - 128.0f) / 128.0f; }
template <> float to_float(int16_t v) { return float(v) / 32768.0f; }
template <> float to_float(int32_t v) { return float(double(v) / 2147483648.0); }
template <> float to_float(int64_t v) { return float(double(v) / 9223372036854775808.0); }
template <> float to_float(float v) { return v; }
template <> float to_float(double v) { return float(v); }

// Interleaved or planar samples of type T -> interleaved float at `out`.
template <typename T>
void convert(const AVFrame& f, bool planar, int channels, float* out) {
  const int n = f.nb_samples;
  if (!planar) {
    const T* in = reinterpret_cast<const T*>(f.extended_data[0]);
    for (int i = 0; i < n * channels; ++i) out[i] = to_float(in[i]);
    return;
  }
  for (int c = 0; c < channels; ++c) {
    const T* in = reinterpret_cast<const T*>(f.extended_data[c]);
    for (int i = 0; i < n; ++i) out[size_t(i) * size_t(channels) + size_t(c)] = to_float(in[i]);
  }
}

// Appends `in` (interleaved, `from` channels) to `out` as `to` channels, each
// carrying the mean of the input's: the same mono as the input once the
// stream is mixed down, which is all corepool ever keeps.
void fold_channels(const std::vector<float>& in, int from, int to, std::vector<float>& out) {
  const size_t frames = in.size() / size_t(from);
  const size_t at = out.size();
  out.resize(at + frames * size_t(to));
  for (size_t i = 0; i < frames; ++i) {
    float sum = 0;
    for (int c = 0; c < from; ++c) sum += in[i * size_t(from) + size_t(c)];
    for (int c = 0; c < to; ++c) out[at + i * size_t(to) + size_t(c)] = sum / float(from);
  }
}

}  // namespace

AudioDecoder::AudioDecoder(std::unique_ptr<MediaInput> input, std::string name, int audio_index,
                           bool in_memory)
    : name_(std::move(name)), in_memory_(in_memory), input_(std::move(input)) {
  select_stream(audio_index);
  open_codec();
  packet_holder_.reset(packet_ = av_packet_alloc());
  frame_holder_.reset(frame_ = av_frame_alloc());
  if (!packet_ || !frame_) throw AudioError(name_, "out of memory opening the decoder");
}

AudioDecoder::~AudioDecoder() = default;

void AudioDecoder::FreeCodec::operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
void AudioDecoder::FreePacket::operator()(AVPacket* p) const { av_packet_free(&p); }
void AudioDecoder::FreeFrame::operator()(AVFrame* f) const { av_frame_free(&f); }

// The other streams are discarded in the demuxer: a video track's packets are
// skipped over, never read into memory.
void AudioDecoder::select_stream(int audio_index) {
  AVFormatContext* format = input_->get();
  int audio = 0, video = 0, other = 0;
  for (unsigned i = 0; i < format->nb_streams; ++i) {
    AVStream* st = format->streams[i];
    st->discard = AVDISCARD_ALL;
    const AVMediaType type = st->codecpar->codec_type;
    if (type == AVMEDIA_TYPE_AUDIO) {
      if (audio++ == audio_index) stream_ = st;
    } else if (type == AVMEDIA_TYPE_VIDEO) {
      ++video;
    } else {
      ++other;
    }
  }
  if (audio == 0) {
    std::string has = video > 0 ? std::to_string(video) + " video stream" + (video == 1 ? "" : "s") : "";
    if (other > 0) has += (has.empty() ? "" : " and ") + std::to_string(other) + " other stream" + (other == 1 ? "" : "s");
    throw AudioError(name_, "not an audio file (no audio stream; " + input_->container() +
                                (has.empty() ? " with no streams" : " with " + has) + ")",
                     AudioErrorKind::kNotAudio);
  }
  if (!stream_) {
    throw AudioError(name_, "no audio stream " + std::to_string(audio_index) + ": the file has " +
                                std::to_string(audio) + " audio stream" + (audio == 1 ? "" : "s") +
                                " (--audio-stream 0.." + std::to_string(audio - 1) + ")");
  }
  stream_->discard = AVDISCARD_DEFAULT;
}

void AudioDecoder::open_codec() {
  const AVCodecParameters* par = stream_->codecpar;
  const AVCodec* codec = avcodec_find_decoder(par->codec_id);
  if (!codec) {
    throw AudioError(name_, std::string("no decoder for the audio codec '") + avcodec_get_name(par->codec_id) + "'");
  }
  codec_holder_.reset(codec_ = avcodec_alloc_context3(codec));
  if (!codec_ || avcodec_parameters_to_context(codec_, par) < 0) {
    throw AudioError(name_, "cannot set up the decoder");
  }
  codec_->pkt_timebase = stream_->time_base;
  codec_->thread_count = 1;
  take_ffmpeg_message();
  const int rc = avcodec_open2(codec_, codec, nullptr);
  if (rc < 0) {
    const std::string logged = take_ffmpeg_message();
    throw AudioError(name_, std::string("cannot open the ") + codec->name + " decoder (" +
                                (logged.empty() ? ffmpeg_error_text(rc) : logged) + ")");
  }
  channels_ = par->ch_layout.nb_channels;
}

size_t AudioDecoder::read(std::vector<float>& out) {
  for (;;) {
    if (gap_left_ > 0) return append_gap(out);
    if (ended_) return 0;
    const int rc = avcodec_receive_frame(codec_, frame_);
    if (rc == 0) {
      account(*frame_);
      if (gap_left_ > 0) continue;  // the silence first; the frame stays in frame_
      return append_frame(out);
    }
    if (rc == AVERROR_EOF) {
      ended_ = true;
      if (error_pending_) list_refused_end();
      return 0;
    }
    if (rc != AVERROR(EAGAIN)) {
      note_undecodable();
      continue;
    }
    if (!feed() && !draining_) {
      draining_ = true;
      avcodec_send_packet(codec_, nullptr);
    }
  }
}

// A read error of a file is the file system's; anything else ending the data
// early (a partial packet, a demuxer that lost sync for good) is damage.
bool AudioDecoder::feed() {
  if (draining_) return false;
  for (;;) {
    const int rc = av_read_frame(input_->get(), packet_);
    if (rc == AVERROR(EAGAIN) && input_->is_device()) {
      // Nothing captured yet (the device is non-blocking): a stop or the
      // source's deadline ends the wait, else look again in a moment.
      if (input_->interrupted()) return false;
      std::this_thread::sleep_for(kDeviceWait);
      continue;
    }
    if (rc < 0) {
      const bool io = !in_memory_ && rc == AVERROR(EIO);
      if (io) throw AudioError(name_, "read error (" + ffmpeg_error_text(rc) + ")", AudioErrorKind::kIo);
      if (rc != AVERROR_EOF) {
        ended_damaged_ = true;
        const std::string logged = take_ffmpeg_message();
        end_reason_ = logged.empty() ? ffmpeg_error_text(rc) : logged;
      }
      return false;
    }
    if (packet_->stream_index != stream_->index) {
      av_packet_unref(packet_);
      continue;
    }
    if ((packet_->flags & AV_PKT_FLAG_CORRUPT) && !whole_frames_on_pipe(*packet_)) {
      ended_damaged_ = true;  // cleared again if more data follows
      end_reason_ = "a partial or corrupt packet";
    } else {
      ended_damaged_ = false;
    }
    remember_packet();
    const int sent = avcodec_send_packet(codec_, packet_);
    if (sent < 0 && sent != AVERROR(EAGAIN)) note_undecodable();
    av_packet_unref(packet_);
    return true;
  }
}

// A pipe has no stated length: PCM (raw, or a WAV streamed with an unknown
// data size) is read in fixed-size packets, and the last one comes up short
// and is flagged corrupt. Whole frames in it are the end of the stream.
bool AudioDecoder::whole_frames_on_pipe(const AVPacket& packet) const {
  if (!input_->is_pipe()) return false;
  const AVCodecParameters& par = *stream_->codecpar;
  const int frame_bytes = av_get_bits_per_sample(par.codec_id) / 8 * par.ch_layout.nb_channels;
  return frame_bytes > 0 && packet.size % frame_bytes == 0;
}

// The time and length of the packet going into the codec, for a refusal. Its
// length is the larger of its duration and its size at the stream's bitrate:
// an MP3 parser hands over a stretch of garbage as one packet of one frame's
// duration, however many frames it destroyed.
void AudioDecoder::remember_packet() {
  const int64_t pts = packet_->pts != AV_NOPTS_VALUE ? packet_->pts : packet_->dts;
  const int rate = rate_ > 0 ? rate_ : codec_->sample_rate;
  if (rate <= 0) return;
  double at = seconds(next_ts_ - first_ts_);
  if (pts != AV_NOPTS_VALUE && started_) {
    at = double(av_rescale_q(pts, stream_->time_base, {1, rate}) - first_ts_) / rate;
  }
  packet_at_ = at < 0 ? 0 : at;
  int64_t samples = packet_->duration > 0 ? av_rescale_q(packet_->duration, stream_->time_base, {1, rate}) : 0;
  const int64_t bit_rate = stream_->codecpar->bit_rate > 0 ? stream_->codecpar->bit_rate : input_->get()->bit_rate;
  if (bit_rate > 0) samples = std::max(samples, int64_t(packet_->size) * 8 * rate / bit_rate);
  packet_samples_ = std::min<int64_t>(samples, int64_t(kMaxGapSeconds) * rate);
}

// A packet the codec refused: its stretch goes out as silence before the next
// frame (account), or is only listed if no frame follows.
void AudioDecoder::note_undecodable() {
  if (!error_pending_) error_at_ = packet_at_;
  error_pending_ = true;
  error_samples_ += packet_samples_;
  packet_samples_ = 0;  // a refusal at send and again at receive is one packet
  take_ffmpeg_message();
}

// The last packet(s) refused with no frame after them: a whole file whose
// last block is short or damaged (ksirk's roll.wav: 249 bytes of a 512-byte
// IMA ADPCM block; Ogg files whose last packet Vorbis refuses). Like damage in
// the middle, it costs its stretch, not the file: what was decoded stands and
// the stretch is listed at the end, with nothing filled in after it. Its length
// is what the packet's estimate reaches past the decoded end (0 when the
// packet's whole blocks were decoded and only its tail was refused). Data
// that stops early (a partial packet, a demuxer error, fewer frames than the
// header says) is still truncation: feed() and AudioStream check those.
void AudioDecoder::list_refused_end() {
  const double end = seconds(next_ts_ - first_ts_);
  const double reach = error_at_ + seconds(error_samples_);
  skipped_.push_back({end, std::max(0.0, reach - end), true});
  error_pending_ = false;
  error_samples_ = 0;
}

// A frame that starts later than the previous one ended means audio went
// missing in between (the demuxer skipped damaged data), as does a refused
// packet before it: the larger of the two goes out as silence before the frame.
void AudioDecoder::account(const AVFrame& frame) {
  if (rate_ == 0) rate_ = frame.sample_rate;
  if (frame.sample_rate != rate_) {
    throw AudioError(name_, "sample rate changes from " + std::to_string(rate_) + " to " +
                                std::to_string(frame.sample_rate) + " Hz at t = " +
                                fixed(seconds(next_ts_ - first_ts_), 2) + " s");
  }
  if (frame.ch_layout.nb_channels < 1) {
    throw AudioError(name_, "a frame with no channels at t = " + fixed(seconds(next_ts_ - first_ts_), 2) + " s");
  }
  const int64_t raw = frame.best_effort_timestamp;
  const bool timed = raw != AV_NOPTS_VALUE;
  const int64_t ts = timed ? av_rescale_q(raw, stream_->time_base, {1, rate_}) : next_ts_;
  if (!started_) {
    started_ = true;
    first_ts_ = next_ts_ = ts;
  }
  int64_t gap = ts - next_ts_;
  // Not every container times its frames to the sample: MKV's timestamps are
  // in milliseconds, and Ogg's inside a page are estimates that Vorbis's
  // block switches put off by up to a quarter block and that the next page
  // corrects (a clean libsndfile OGG at 16 kHz: +128 samples, then -128). A
  // gap counts as lost audio only past 2 ms and past the previous frame's
  // length: a demuxer that skips damaged data loses whole packets, and a
  // packet the codec refuses is counted by note_undecodable() whatever its size.
  const int64_t tolerance = std::max({int64_t{2}, int64_t{rate_ / 500}, last_frame_samples_});
  last_frame_samples_ = frame.nb_samples;
  if (!timed || gap <= tolerance || gap > int64_t(kMaxGapSeconds * rate_)) gap = 0;
  const double at = error_pending_ ? std::min(error_at_, seconds(next_ts_ - first_ts_)) : seconds(next_ts_ - first_ts_);
  if (error_pending_) gap = std::max(gap, error_samples_);
  if (gap > 0 || error_pending_) skipped_.push_back({at, seconds(gap), false});
  error_pending_ = false;
  error_samples_ = 0;
  gap_left_ = gap;
  next_ts_ = std::max(next_ts_ + gap, ts) + frame.nb_samples;
}

size_t AudioDecoder::append_gap(std::vector<float>& out) {
  const int64_t n = std::min(gap_left_, kMaxGapChunk);
  out.insert(out.end(), size_t(n) * size_t(channels_), 0.0f);
  gap_left_ -= n;
  if (gap_left_ == 0 && frame_->nb_samples > 0) {
    // The frame that revealed the gap is still waiting in frame_.
    return size_t(n) + append_frame(out);
  }
  return size_t(n);
}

size_t AudioDecoder::append_frame(std::vector<float>& out) {
  const AVFrame& f = *frame_;
  const size_t n = size_t(f.nb_samples);
  const int frame_channels = f.ch_layout.nb_channels;
  // A chained Ogg may change its channel count between links (klettres-data's
  // Czech syllables: a mono link, then a stereo one). Such a frame is decoded
  // with its own count, then folded to the stream's (fold_channels).
  const bool same = frame_channels == channels_;
  std::vector<float>& dst_buffer = same ? out : refold_;
  const size_t at = same ? out.size() : 0;
  dst_buffer.resize(at + n * size_t(frame_channels));
  float* dst = dst_buffer.data() + at;
  const auto fmt = AVSampleFormat(f.format);
  const bool planar = av_sample_fmt_is_planar(fmt) != 0;
  switch (av_get_packed_sample_fmt(fmt)) {
    case AV_SAMPLE_FMT_U8: convert<uint8_t>(f, planar, frame_channels, dst); break;
    case AV_SAMPLE_FMT_S16: convert<int16_t>(f, planar, frame_channels, dst); break;
    case AV_SAMPLE_FMT_S32: convert<int32_t>(f, planar, frame_channels, dst); break;
    case AV_SAMPLE_FMT_S64: convert<int64_t>(f, planar, frame_channels, dst); break;
    case AV_SAMPLE_FMT_FLT: convert<float>(f, planar, frame_channels, dst); break;
    case AV_SAMPLE_FMT_DBL: convert<double>(f, planar, frame_channels, dst); break;
    default:
      dst_buffer.resize(at);
      throw AudioError(name_, std::string("unsupported sample format ") + av_get_sample_fmt_name(fmt));
  }
  if (!same) fold_channels(refold_, frame_channels, channels_, out);
  av_frame_unref(frame_);
  return n;
}

}  // namespace corepool
