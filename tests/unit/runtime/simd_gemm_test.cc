// simd::gemm_bcast and simd::pack_transposed_panels, the products inside attention's vector path, against a
// product in double: every row remainder of the 6-row tile, every column remainder of the vectors (kW wide) and
// chunks (kPanel wide), strided and transposed A, B in panels and row-major, both epilogues. The sizes below
// cover both widths (AVX-512: 16 and 64; AVX2: 8 and 16).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/fast/simd_gemm.h"

namespace {

#if defined(GAF_SIMD)
using gaf::simd::AddToC;
using gaf::simd::kPanel;
using gaf::simd::gemm_bcast;
using gaf::simd::pack_transposed_panels;

TEST(SimdGemm, PackedPanelsHoldTheTransposeAndZeros) {
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 64, 65, 130})
    for (int64_t d : {1, 7, 8, 16, 20, 64})
      for (bool row_major : {true, false}) {
        const int64_t rs = row_major ? d + 3 : 1, cs = row_major ? 1 : n + 2;  // X[i, j] at i rs + j cs
        std::vector<float> x(size_t(n * (d + 3) + d * (n + 2)));
        for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) + 0.5f;
        const int64_t panels = (n + kPanel - 1) / kPanel;
        std::vector<float> out(size_t(panels * kPanel * d), -1.0f);
        pack_transposed_panels(x.data(), n, d, rs, cs, out.data());
        int bad = 0;
        for (int64_t p = 0; p < panels; ++p)
          for (int64_t j = 0; j < d; ++j)
            for (int64_t c = 0; c < kPanel; ++c) {
              const int64_t i = p * kPanel + c;
              const float want = i < n ? x[size_t(i * rs + j * cs)] : 0.0f;
              bad += out[size_t(p * kPanel * d + j * kPanel + c)] != want;
            }
        EXPECT_EQ(bad, 0) << "n " << n << " d " << d << (row_major ? " row-major" : " transposed");
      }
}

TEST(SimdGemm, ProductsMatchDoublePrecision) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  for (int64_t m : {1, 5, 6, 7, 13})
    for (int64_t n : {1, 5, 8, 16, 17, 24, 64, 70, 130})
      for (int64_t k : {1, 9, 64})
        for (int variant = 0; variant < 4; ++variant) {
          const bool a_transposed = variant & 1, panels = variant & 2;
          const float alpha = 0.75f;
          std::vector<float> a(size_t(m * k)), b(size_t(k * n)), c0(size_t(m * (n + 5)));
          for (float& x : a) x = val(rng);
          for (float& x : b) x = val(rng);
          for (float& x : c0) x = val(rng);
          const int64_t ars = a_transposed ? 1 : k, acs = a_transposed ? m : 1;  // A[i, kk] at i ars + kk acs
          // B[kk, j] at b[kk n + j]; as panels: Bᵀ packed (the panels of Xᵀ for X = Bᵀ, whose rows are B's columns)
          std::vector<float> bp(size_t((n + kPanel - 1) / kPanel * kPanel * k));
          if (panels) pack_transposed_panels(b.data(), n, k, 1, n, bp.data());
          for (bool accumulate : {false, true}) {
            std::vector<float> c = c0;
            const int64_t ldc = n + 5;
            const float* bb = panels ? bp.data() : b.data();
            const int64_t ldb = panels ? kPanel : n, chunk = panels ? kPanel * k : kPanel;
            if (accumulate)
              gemm_bcast(m, n, k, alpha, a.data(), ars, acs, bb, ldb, chunk, c.data(), ldc, AddToC{});
            else
              gemm_bcast(m, n, k, alpha, a.data(), ars, acs, bb, ldb, chunk, c.data(), ldc);
            double worst = 0;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n + 5; ++j) {
                double want = c0[size_t(i * ldc + j)];  // the 5 columns past n stay as they were
                if (j < n) {
                  double dot = 0;
                  for (int64_t kk = 0; kk < k; ++kk)
                    dot += double(a[size_t(i * ars + kk * acs)]) * double(b[size_t(kk * n + j)]);
                  want = alpha * dot + (accumulate ? want : 0.0);
                }
                worst = std::max(worst, std::abs(double(c[size_t(i * ldc + j)]) - want));
              }
            EXPECT_LT(worst, 1e-5) << "m " << m << " n " << n << " k " << k << " variant " << variant
                                   << (accumulate ? " accumulating" : "");
          }
        }
}
#endif

}  // namespace
