// Plain-loop convolutions for what oneDNN does not take (double, integer / quantized types). 1-D and 2-D
// problems run as 3-D ones with leading size-1 spatial dims. Parallel over (batch, output channel) planes.
#pragma once

#include <algorithm>
#include <vector>

#include "ops/geometry.h"
#include "runtime/kernels/common.h"

namespace gaf::runtime::dnnl_detail {

inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// N, C (input channels), M (output channels), G (groups) and the window padded to 3 spatial dims.
struct ConvDims {
  int64_t N = 0, C = 0, M = 0, G = 1;
  int64_t in[3], k[3], s[3], d[3], pb[3], out[3];

  ConvDims(int64_t n, int64_t c, int64_t m, int64_t g, const ops::Window& w) : N(n), C(c), M(m), G(g) {
    const int r = w.rank();
    GAF_ASSERT(r >= 1 && r <= 3, "ConvDims: 1 to 3 spatial dims");
    for (int i = 0; i < 3; ++i) {
      int j = i - (3 - r);
      in[i] = j >= 0 ? w.in[j] : 1;
      k[i] = j >= 0 ? w.k[j] : 1;
      s[i] = j >= 0 ? w.s[j] : 1;
      d[i] = j >= 0 ? w.d[j] : 1;
      pb[i] = j >= 0 ? w.pb[j] : 0;
      out[i] = j >= 0 ? w.out[j] : 1;
    }
  }
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

// y-plane of (n, m) = sum over the group's input channels and taps of (w - w_zp[m]) * (x - x_zp); `finish(n,
// m, acc, out_size)` consumes each accumulated plane. Padding contributes nothing (x == x_zp there). Weights
// are [M, C/G, k...]; `w_zp` may be null.
template <class Acc, class TX, class TW, class Finish>
void ref_conv(const ConvDims& c, const TX* x, Acc x_zp, const TW* w, const Acc* w_zp, Finish&& finish) {
  const int64_t cg = c.C / c.G, mg = c.M / c.G, insz = c.in_size(), outsz = c.out_size(), ksz = c.k_size();
  const int64_t work = std::max<int64_t>(1, outsz * cg * ksz);
  parallel_for(c.N * c.M, std::max<int64_t>(1, 65536 / work), [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(outsz);
    for (int64_t p = b; p < e; ++p) {
      const int64_t n = p / c.M, m = p % c.M, g = m / mg;
      std::fill(acc.begin(), acc.end(), Acc(0));
      const Acc wz = w_zp ? w_zp[m] : Acc(0);
      for (int64_t ci = 0; ci < cg; ++ci) {
        const TX* xp = x + (n * c.C + g * cg + ci) * insz;
        const TW* wp = w + (m * cg + ci) * ksz;
        for (int64_t kd = 0; kd < c.k[0]; ++kd)
          for (int64_t kh = 0; kh < c.k[1]; ++kh)
            for (int64_t kw = 0; kw < c.k[2]; ++kw) {
              const Acc wv = Acc(wp[(kd * c.k[1] + kh) * c.k[2] + kw]) - wz;
              const int64_t off_w = kw * c.d[2] - c.pb[2];
              const int64_t lo = std::max<int64_t>(0, ceil_div(-off_w, c.s[2]));
              const int64_t hi = std::min<int64_t>(c.out[2], floor_div(c.in[2] - 1 - off_w, c.s[2]) + 1);
              if (lo >= hi) continue;
              for (int64_t od = 0; od < c.out[0]; ++od) {
                const int64_t id = od * c.s[0] - c.pb[0] + kd * c.d[0];
                if (id < 0 || id >= c.in[0]) continue;
                for (int64_t oh = 0; oh < c.out[1]; ++oh) {
                  const int64_t ih = oh * c.s[1] - c.pb[1] + kh * c.d[1];
                  if (ih < 0 || ih >= c.in[1]) continue;
                  Acc* ap = acc.data() + (od * c.out[1] + oh) * c.out[2];
                  const TX* xr = xp + (id * c.in[1] + ih) * c.in[2];
                  const int64_t st = c.s[2];
                  for (int64_t ow = lo; ow < hi; ++ow) ap[ow] += wv * (Acc(xr[ow * st + off_w]) - x_zp);
                }
              }
            }
      }
      finish(n, m, acc.data(), outsz);
    }
  });
}

// Transposed convolution: every input element scatters x * w into the output window it maps to. Weights are
// [C, M/G, k...]; `bias` may be null. Here `c.in` is the transposed op's input and `c.out` its output.
template <class Acc, class T>
void ref_conv_transpose(const ConvDims& c, const T* x, const T* w, const T* bias, T* y) {
  const int64_t cg = c.C / c.G, mg = c.M / c.G, insz = c.in_size(), outsz = c.out_size(), ksz = c.k_size();
  const int64_t work = std::max<int64_t>(1, insz * cg * ksz);
  parallel_for(c.N * c.M, std::max<int64_t>(1, 65536 / work), [&](int64_t b, int64_t e) {
    std::vector<Acc> acc(outsz);
    for (int64_t p = b; p < e; ++p) {
      const int64_t n = p / c.M, m = p % c.M, g = m / mg, ml = m % mg;
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int64_t ch = g * cg + ci;
        const T* xp = x + (n * c.C + ch) * insz;
        const T* wp = w + (ch * mg + ml) * ksz;
        for (int64_t kd = 0; kd < c.k[0]; ++kd)
          for (int64_t kh = 0; kh < c.k[1]; ++kh)
            for (int64_t kw = 0; kw < c.k[2]; ++kw) {
              const Acc wv = Acc(wp[(kd * c.k[1] + kh) * c.k[2] + kw]);
              const int64_t off_w = kw * c.d[2] - c.pb[2];
              const int64_t lo = std::max<int64_t>(0, ceil_div(-off_w, c.s[2]));
              const int64_t hi = std::min<int64_t>(c.in[2], floor_div(c.out[2] - 1 - off_w, c.s[2]) + 1);
              if (lo >= hi) continue;
              for (int64_t id = 0; id < c.in[0]; ++id) {
                const int64_t od = id * c.s[0] - c.pb[0] + kd * c.d[0];
                if (od < 0 || od >= c.out[0]) continue;
                for (int64_t ih = 0; ih < c.in[1]; ++ih) {
                  const int64_t oh = ih * c.s[1] - c.pb[1] + kh * c.d[1];
                  if (oh < 0 || oh >= c.out[1]) continue;
                  Acc* ap = acc.data() + (od * c.out[1] + oh) * c.out[2];
                  const T* xr = xp + (id * c.in[1] + ih) * c.in[2];
                  const int64_t st = c.s[2];
                  for (int64_t iw = lo; iw < hi; ++iw) ap[iw * st + off_w] += wv * Acc(xr[iw]);
                }
              }
            }
      }
      T* yp = y + p * outsz;
      const Acc bv = bias ? Acc(bias[m]) : Acc(0);
      for (int64_t i = 0; i < outsz; ++i) yp[i] = T(acc[i] + bv);
    }
  });
}

}  // namespace gaf::runtime::dnnl_detail
