// A small model the rules and target fuzz targets plan with: a MatMul + bias + GELU block, a softmax over
// attention-like scores and a LayerNorm, so forbid/force patterns, skip lists and cost numbers all meet something.
#pragma once

#include "gaf/onnx_io.h"

namespace gaf::fuzz {

inline const char* kPlanModel = R"(
  <ir_version: 8, opset_import: ["" : 17]>
  g (float[2, 16] x, float[16, 16] w) => (float[2, 16] y, float[2, 16] s) {
    m = MatMul(x, w)
    b = Constant <value = float[16] {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}> ()
    a = Add(m, b)
    h = Constant <value = float {0.5}> ()
    t = Mul(a, h)
    r = Relu(t)
    y = LayerNormalization <axis = -1> (r, b, b)
    e = Exp(a)
    s = Softmax <axis = -1> (e)
  }
)";

}  // namespace gaf::fuzz
