// Builders for the affine-folding pass tests (conv-bn-fold, gemm-bn-fold): positive constants and an inference
// BatchNormalization with constant statistics.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "gaf/builder.h"

namespace gaf::testing {

// A constant of uniform values in [0.5, 1.5) (a BatchNormalization variance, a scale), seeded by its name.
inline Value* positive_constant(GraphBuilder& b, const std::string& name, std::vector<int64_t> dims) {
  Tensor t(DType::Float, dims);
  std::mt19937 rng(uint32_t(std::hash<std::string>{}(name)));
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return b.constant(t, name);
}

// BatchNormalization(in) over `m` channels with random constant scale, shift, mean and a positive variance.
inline Value* batch_norm(GraphBuilder& b, Value* in, int64_t m) {
  return b.op("BatchNormalization",
              {in, b.random_constant("scale", {m}, 1.0f), b.random_constant("shift", {m}, 1.0f),
               b.random_constant("mean", {m}, 1.0f), positive_constant(b, "var", {m})},
              {{"epsilon", 1e-3f}});
}

}  // namespace gaf::testing
