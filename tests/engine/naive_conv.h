// A naive 3x3 convolution (stride 1, padding 1) in double: the independent
// reference for corepool's Winograd layers (winograd_test.cc, winograd_f43_test.cc).
#pragma once

#include <ATen/ATen.h>

namespace corepool {

// out[n][o][y][x] = bias[o] + sum over c, dy, dx of w[o][c][dy][dx] * in[n][c][y+dy-1][x+dx-1] (zero outside).
inline at::Tensor naive_conv3x3(const at::Tensor& in, const at::Tensor& w, const at::Tensor& bias, bool relu) {
  const int64_t n_items = in.size(0), channels = in.size(1), h = in.size(2), wd = in.size(3), outs = w.size(0);
  at::Tensor out = at::zeros({n_items, outs, h, wd}, at::kDouble);
  const at::Tensor in64 = in.to(at::kDouble), w64 = w.to(at::kDouble), bias64 = bias.to(at::kDouble);
  auto I = in64.accessor<double, 4>();
  auto W = w64.accessor<double, 4>();
  auto B = bias64.accessor<double, 1>();
  auto O = out.accessor<double, 4>();
  for (int64_t n = 0; n < n_items; ++n)
    for (int64_t o = 0; o < outs; ++o)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < wd; ++x) {
          double sum = B[o];
          for (int64_t c = 0; c < channels; ++c)
            for (int64_t dy = 0; dy < 3; ++dy)
              for (int64_t dx = 0; dx < 3; ++dx) {
                const int64_t yy = y + dy - 1, xx = x + dx - 1;
                if (yy >= 0 && yy < h && xx >= 0 && xx < wd) sum += W[o][c][dy][dx] * I[n][c][yy][xx];
              }
          O[n][o][y][x] = relu && sum < 0 ? 0 : sum;
        }
  return out.to(at::kFloat);
}

}  // namespace corepool
