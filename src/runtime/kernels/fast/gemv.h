// y[m, n] = sum_k a[m, k] b[k, n] for a few rows m < 8 of fp32 activations against constant weights b: the
// classifier at the end of a CNN at batch 1 (EfficientNet-B0's 1280 x 1000, 5 MB of weights read for 2.6 MFLOP).
// Such a product is a stream over the weights; oneDNN 2.6's matmul ran it at 54 GB/s with the weights in cache
// (0.094 ms; ONNX Runtime's 0.048 ms). Here the weights are packed once into panels of 64 columns, [panel][K][64],
// so that each thread streams whole panels front to back, four vectors of columns per row of a, with the rows of
// a broadcast from cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/kernels/fast/line_vector.h"

namespace gaf::runtime {

class Gemv {
 public:
  static constexpr int64_t kMaxRows = 8;
  // How the packed weights are stored: fp32; bfloat16 (half the bytes, fp32 products); int8 with a scale per
  // column (a quarter, w = scale[n] * q). Decoding reads every weight once per token: the bytes are the time.
  enum class Storage { F32, BF16, Int8 };

  // b: [K, N] row-major, or [N, K] when transposed (Gemm's transB: a Linear layer's weights).
  Gemv(const float* b, int64_t k, int64_t n, bool transposed);
  // Compressed weights as a model stores them (raw: uint16_t bfloat16 or int8_t values; scale: [N], int8 only).
  Gemv(Storage storage, const void* raw, const float* scale, int64_t k, int64_t n, bool transposed);

  // a: m rows of K (row stride lda); y: [m, N]. Each panel of weights is read from memory once for all m rows
  // (its K x 64 weights stay in cache while the row groups take turns). Against oneDNN's matmul on its own
  // packed weights (bench/bench_main.cc, 2 threads, AVX-512): 1 row 0.08-0.1 ms either way, 16 rows 0.21 vs
  // 0.21, 128 rows 1.5-1.7 vs 1.55-1.6 ms for [768, 3072]; so it takes a few rows (kMaxRows) where nothing was
  // packed ahead, and prompts up to 256 rows when the weights were (dnnl/matmul.cc).
  void run(const float* a, int64_t m, int64_t lda, float* y) const;

  // The weights as they were given (b: [K, N], or [N, K] transposed) into out; F32 storage only.
  void unpack(float* out) const;

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }

 private:
  Storage storage_ = Storage::F32;
  int64_t k_, n_, panels_;
  bool transposed_ = false;
  // [panel][K][64] elements of the storage type, columns past N zero; on whole cache lines, so that no vector
  // load of a weight row straddles two (a std::vector's buffer is 16-byte aligned; [768, 3072] with the
  // weights in cache, 1 row: 0.094-0.099 -> 0.062-0.067 ms).
  line_vector<uint8_t> packed_;
  line_vector<float> scale_;  // Int8: [panels * 64], zero past N
};

}  // namespace gaf::runtime
