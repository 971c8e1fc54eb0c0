// The arithmetic of corepool's Winograd F(4x4, 3x3) (winograd_f43.cc, whose
// opening comment gives the matrices): eight tiles at a time in one generic
// vector, the input and output transforms along one axis, the phase split of
// a row, and the weight transform. Included by winograd_f43.cc only, so that
// its two ISA versions (AVX2 and portable) inline these into each of theirs.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __SSE2__
#include <immintrin.h>
#endif

namespace corepool::winograd_f43_math {

// Eight floats, eight tiles: one AVX register in the AVX2 version, two SSE
// registers in the portable one (GCC's generic vectors lower to either).
typedef float Vec __attribute__((vector_size(32)));
// Passing Vec by value has no stable ABI without AVX; these helpers are
// internal and inlined, so GCC's warning about it does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"  // in the files that include this one: winograd_f43.cc only

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// o = B^T d along one axis of the 6x6 patch, for eight tiles at once.
inline void bt6(const Vec d[6], Vec o[6]) {
  o[0] = 4 * d[0] - 5 * d[2] + d[4];
  o[1] = -4 * (d[1] + d[2]) + d[3] + d[4];
  o[2] = 4 * (d[1] - d[2]) - d[3] + d[4];
  o[3] = 2 * (d[3] - d[1]) - d[2] + d[4];
  o[4] = 2 * (d[1] - d[3]) - d[2] + d[4];
  o[5] = 4 * d[1] - 5 * d[3] + d[5];
}

// o = A^T m along one axis of the 6x6 products, for eight tiles at once.
inline void at6(const Vec m[6], Vec o[4]) {
  const Vec s12 = m[1] + m[2], d12 = m[1] - m[2];
  const Vec s34 = m[3] + m[4], d34 = m[3] - m[4];
  o[0] = m[0] + s12 + s34;
  o[1] = d12 + 2 * d34;
  o[2] = s12 + 4 * s34;
  o[3] = d12 + 8 * d34 + m[5];
}

// dst[p][t] = src[4 t + p] for p < 4, t < tiles (dst[p] = dst + p * stride):
// a row split into the four phases of its 4-wide tiles. 4x4 transposes of
// SSE registers where the ISA has them (every x86-64), else one by one.
inline void deinterleave4(const float* src, int64_t tiles, float* dst, int64_t stride) {
  int64_t t = 0;
#ifdef __SSE2__
  for (; t + 4 <= tiles; t += 4) {
    __m128 r0 = _mm_loadu_ps(src + 4 * t), r1 = _mm_loadu_ps(src + 4 * t + 4);
    __m128 r2 = _mm_loadu_ps(src + 4 * t + 8), r3 = _mm_loadu_ps(src + 4 * t + 12);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(dst + t, r0);
    _mm_storeu_ps(dst + stride + t, r1);
    _mm_storeu_ps(dst + 2 * stride + t, r2);
    _mm_storeu_ps(dst + 3 * stride + t, r3);
  }
#endif
  for (; t < tiles; ++t) {
    for (int64_t p = 0; p < 4; ++p) dst[p * stride + t] = src[4 * t + p];
  }
}

// U = G g G^T of one 3x3 kernel g, in double; tap p goes to u[p * stride].
inline void transform_weights(const float* g, float* u, int64_t stride) {
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  double gg[6][3];
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 3; ++j) {
      gg[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
    }
  }
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      u[(i * 6 + j) * stride] = static_cast<float>(gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2]);
    }
  }
}

}  // namespace corepool::winograd_f43_math
