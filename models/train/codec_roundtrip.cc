// The encoder's output goes straight into the matching decoder packet by
// packet; the codec's parameters (extradata: AAC's AudioSpecificConfig, Opus's
// header) are handed over as a container would. Decoders that only speak
// 48 kHz (Opus) are resampled back with the pipeline's own resampler.
#include "models/train/codec_roundtrip.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
}

#include "audio/resampler.h"

namespace corepool::train {
namespace {

struct FreeCodec {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FreeFrame {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct FreePacket {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FreeParameters {
  void operator()(AVCodecParameters* p) const { avcodec_parameters_free(&p); }
};
using CodecPtr = std::unique_ptr<AVCodecContext, FreeCodec>;

[[noreturn]] void fail(const Codec& codec, const std::string& what) {
  throw std::runtime_error("codec " + codec.encoder + " at " + std::to_string(codec.bit_rate) + " b/s: " + what);
}

// The first of the encoder's sample formats that we can fill from float
// mono (packed and planar are the same thing for one channel).
AVSampleFormat mono_format(const AVCodec& enc) {
  for (const AVSampleFormat* f = enc.sample_fmts; f && *f != AV_SAMPLE_FMT_NONE; ++f) {
    if (*f == AV_SAMPLE_FMT_FLT || *f == AV_SAMPLE_FMT_FLTP || *f == AV_SAMPLE_FMT_S16 || *f == AV_SAMPLE_FMT_S16P) {
      return *f;
    }
  }
  return AV_SAMPLE_FMT_NONE;
}

void fill(AVFrame& frame, const float* x, int n) {
  const bool s16 = frame.format == AV_SAMPLE_FMT_S16 || frame.format == AV_SAMPLE_FMT_S16P;
  for (int i = 0; i < frame.nb_samples; ++i) {
    const float v = i < n ? std::clamp(x[i], -1.0f, 1.0f) : 0.0f;
    if (s16) {
      reinterpret_cast<int16_t*>(frame.data[0])[i] = int16_t(std::lround(v * 32767.0f));
    } else {
      reinterpret_cast<float*>(frame.data[0])[i] = v;
    }
  }
}

// The decoded frame's first channel as float, whatever its sample format.
void append(const AVFrame& frame, std::vector<float>& out) {
  const int fmt = frame.format;
  for (int i = 0; i < frame.nb_samples; ++i) {
    switch (fmt) {
      case AV_SAMPLE_FMT_FLTP: out.push_back(reinterpret_cast<const float*>(frame.data[0])[i]); break;
      case AV_SAMPLE_FMT_FLT:
        out.push_back(reinterpret_cast<const float*>(frame.data[0])[i * frame.ch_layout.nb_channels]);
        break;
      case AV_SAMPLE_FMT_S16P: out.push_back(reinterpret_cast<const int16_t*>(frame.data[0])[i] / 32768.0f); break;
      case AV_SAMPLE_FMT_S16:
        out.push_back(reinterpret_cast<const int16_t*>(frame.data[0])[i * frame.ch_layout.nb_channels] / 32768.0f);
        break;
      default: throw std::runtime_error("decoder gave an unexpected sample format");
    }
  }
}

struct Decoded {
  std::vector<float> samples;
  int rate = 0;
};

// Encodes `x` and decodes every packet as it comes; the raw decoder output,
// priming delay included.
Decoded through(const std::vector<float>& x, int rate, const Codec& codec) {
  const AVCodec* enc = avcodec_find_encoder_by_name(codec.encoder.c_str());
  if (!enc) fail(codec, "FFmpeg has no such encoder");
  CodecPtr e(avcodec_alloc_context3(enc));
  e->sample_rate = rate;
  e->sample_fmt = mono_format(*enc);
  if (e->sample_fmt == AV_SAMPLE_FMT_NONE) fail(codec, "no float or 16-bit sample format");
  av_channel_layout_default(&e->ch_layout, 1);
  e->bit_rate = codec.bit_rate;
  e->time_base = {1, rate};
  e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;  // extradata for the decoder, as a container carries it
  if (avcodec_open2(e.get(), enc, nullptr) < 0) fail(codec, "the encoder refused " + std::to_string(rate) + " Hz mono");

  std::unique_ptr<AVCodecParameters, FreeParameters> par(avcodec_parameters_alloc());
  avcodec_parameters_from_context(par.get(), e.get());
  const AVCodec* dec = avcodec_find_decoder(enc->id);
  if (!dec) fail(codec, "FFmpeg has no decoder for it");
  CodecPtr d(avcodec_alloc_context3(dec));
  avcodec_parameters_to_context(d.get(), par.get());
  d->pkt_timebase = e->time_base;
  if (avcodec_open2(d.get(), dec, nullptr) < 0) fail(codec, "the decoder would not open");

  std::unique_ptr<AVFrame, FreeFrame> in(av_frame_alloc()), out(av_frame_alloc());
  std::unique_ptr<AVPacket, FreePacket> packet(av_packet_alloc());
  const int frame_size = e->frame_size > 0 ? e->frame_size : 1024;
  Decoded decoded;
  int packets = 0, refused = 0;
  auto drain_decoder = [&] {
    while (avcodec_receive_frame(d.get(), out.get()) == 0) {
      decoded.rate = out->sample_rate;
      append(*out, decoded.samples);
      av_frame_unref(out.get());
    }
  };
  auto drain_encoder = [&] {
    for (;;) {
      const int rc = avcodec_receive_packet(e.get(), packet.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      if (rc < 0) fail(codec, "encoding failed");
      ++packets;
      int sent = avcodec_send_packet(d.get(), packet.get());
      if (sent == AVERROR(EAGAIN)) {  // frames to take first
        drain_decoder();
        sent = avcodec_send_packet(d.get(), packet.get());
      }
      if (sent < 0) {
        // FFmpeg's own AAC encoder now and then writes a packet its decoder
        // refuses (loud, clipped input). A player conceals it; here it is a
        // frame of silence, as corepool's decoder reads a refused packet, so
        // what follows stays in time.
        ++refused;
        const int out_rate = d->sample_rate > 0 ? d->sample_rate : rate;
        decoded.samples.insert(decoded.samples.end(), size_t(int64_t(frame_size) * out_rate / rate), 0.0f);
      }
      av_packet_unref(packet.get());
      drain_decoder();
    }
  };
  for (size_t at = 0; at < x.size(); at += size_t(frame_size)) {
    in->nb_samples = frame_size;
    in->format = e->sample_fmt;
    in->sample_rate = rate;
    av_channel_layout_copy(&in->ch_layout, &e->ch_layout);
    if (av_frame_get_buffer(in.get(), 0) < 0) fail(codec, "out of memory");
    fill(*in, x.data() + at, int(std::min(x.size() - at, size_t(frame_size))));
    in->pts = int64_t(at);
    if (avcodec_send_frame(e.get(), in.get()) < 0) fail(codec, "the encoder refused a frame");
    av_frame_unref(in.get());
    drain_encoder();
  }
  avcodec_send_frame(e.get(), nullptr);
  drain_encoder();
  avcodec_send_packet(d.get(), nullptr);
  drain_decoder();
  if (refused * 2 > packets) {
    fail(codec, "the decoder refused " + std::to_string(refused) + " of " + std::to_string(packets) + " packets");
  }
  return decoded;
}

std::vector<float> at_rate(Decoded d, int rate) {
  if (d.rate == rate || d.rate == 0) return std::move(d.samples);
  std::vector<float> out;
  Resampler(d.rate, rate).process(d.samples.data(), d.samples.size(), true, out);
  return out;
}

// The codec's delay in samples at `rate`: where a click comes back. Measured
// once per codec (it depends on the encoder, decoder and rate, not on the
// audio), since FFmpeg's initial_padding is stated at different rates by
// different encoders and the MP3 decoder adds its own.
size_t delay_of(int rate, const Codec& codec) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, int, int>, size_t> known;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(codec.encoder, codec.bit_rate, rate);
  if (auto it = known.find(key); it != known.end()) return it->second;
  std::vector<float> click(size_t(rate / 2), 0.0f);
  for (int i = 0; i < rate / 200; ++i) click[size_t(rate / 10 + i)] = float(0.8 * std::sin(6.2832 * 1000.0 * i / rate));
  const std::vector<float> back = at_rate(through(click, rate, codec), rate);
  size_t peak = 0;
  for (size_t i = 0; i < back.size(); ++i) {
    if (std::fabs(back[i]) > std::fabs(back[peak])) peak = i;
  }
  // The burst is 5 ms long: its energy centre, not its loudest sample, marks
  // where it came back.
  double sum = 0, weighted = 0;
  for (size_t i = peak > size_t(rate / 50) ? peak - size_t(rate / 50) : 0; i < std::min(back.size(), peak + size_t(rate / 50)); ++i) {
    sum += double(back[i]) * back[i];
    weighted += double(back[i]) * back[i] * double(i);
  }
  const double centre = sum > 0 ? weighted / sum : double(peak);
  const double sent = rate / 10 + rate / 400.0;  // the burst's centre
  const size_t delay = centre > sent ? size_t(std::lround(centre - sent)) : 0;
  known[key] = delay;
  return delay;
}

}  // namespace

std::vector<float> codec_roundtrip(const std::vector<float>& x, int rate, const Codec& codec) {
  const size_t delay = delay_of(rate, codec);
  std::vector<float> back = at_rate(through(x, rate, codec), rate);
  std::vector<float> out(x.size(), 0.0f);
  for (size_t i = 0; i < out.size() && i + delay < back.size(); ++i) out[i] = back[i + delay];
  return out;
}

const std::vector<Codec>& training_codecs() {
  static const std::vector<Codec> codecs = {
      {"libopus", 12000}, {"libopus", 24000}, {"libopus", 48000},  // VoIP to podcast
      {"libmp3lame", 24000}, {"libmp3lame", 48000}, {"libmp3lame", 64000},
      {"aac", 32000}, {"aac", 48000}, {"aac", 64000},
  };
  return codecs;
}

}  // namespace corepool::train
