#include "runtime/kernels/dnnl/post_op_pass.h"

#include <algorithm>
#include <cmath>

#include "ops/simd_math.h"
#include "runtime/kernels/dnnl/dnnl_util.h"

namespace gaf::runtime::dnnl_detail {

using dnnl_ops::PostOp;

namespace {

// Columns of a row taken through the whole chain at a time: 4 KB, well inside L1 with the operands beside it.
constexpr int64_t kStretch = 1024;

float binary_ref(const PostOp& op, float x, float t) {
  if (op.kind == PostOp::Kind::Add) return x + t;
  switch (op.binary) {
    case PostOp::BinaryOp::Mul: return x * t;
    case PostOp::BinaryOp::Sub: return x - t;
    case PostOp::BinaryOp::Div: return x / t;
    case PostOp::BinaryOp::Max: return std::max(x, t);
    case PostOp::BinaryOp::Min: return std::min(x, t);
  }
  return x;
}

#if defined(GAF_SIMD)
// f(the vector form of an op without an operand), where there is one that keeps eltwise_ref's results (NaN
// included: a NaN stays NaN through Relu and Clip, as the unfused ops keep it); nothing where the op runs scalar.
template <class F>
void with_vector_eltwise(const PostOp& op, F&& f) {
  using namespace simd;
  switch (op.kind) {
    case PostOp::Kind::Relu: {
      const vf a = set1(op.alpha), z = zero();
      return f([a, z](vf v) { return select(gt(v, z), v, mul(v, a)); });
    }
    case PostOp::Kind::GeluErf: return f([](vf v) { return gelu_erfv(v); });
    case PostOp::Kind::GeluTanh: return f([](vf v) { return gelu_tanhv(v); });
    case PostOp::Kind::Swish: {
      const vf c = set1(-op.alpha * 1.44269504088896341f);
      return f([c](vf v) { return swishv(v, c); });
    }
    case PostOp::Kind::HardSwish: return f([](vf v) { return hard_swishv(v); });
    case PostOp::Kind::Clip: {
      // max and min return their second operand where either is NaN: x goes second.
      const vf lo = set1(op.alpha), hi = set1(op.beta);
      return f([lo, hi](vf v) { return min(hi, max(lo, v)); });
    }
    case PostOp::Kind::Linear: {
      const vf a = set1(op.alpha), b = set1(op.beta);
      return f([a, b](vf v) { return fmadd(v, a, b); });
    }
    case PostOp::Kind::Eltwise:
      switch (op.eltwise) {
        case PostOp::Unary::Sigmoid: return f([](vf v) { return sigmoidv(v); });
        case PostOp::Unary::Abs: return f([](vf v) { return simd::abs(v); });
        case PostOp::Unary::Exp: return f([](vf v) { return expv(v); });
        case PostOp::Unary::Sqrt: return f([](vf v) { return sqrtv(v); });
        default: return;
      }
    case PostOp::Kind::Add:
    case PostOp::Kind::Binary: return;
  }
}

// f(the vector form of an op with an operand), where there is one that keeps binary_ref's results.
template <class F>
void with_vector_binary(const PostOp& op, F&& f) {
  using namespace simd;
  if (op.kind == PostOp::Kind::Add) return f([](vf x, vf t) { return add(x, t); });
  switch (op.binary) {
    case PostOp::BinaryOp::Mul: return f([](vf x, vf t) { return mul(x, t); });
    case PostOp::BinaryOp::Sub: return f([](vf x, vf t) { return sub(x, t); });
    // std::max(x, t) and std::min(x, t) give x where either is NaN or both are zeros; the instructions give
    // their second operand.
    case PostOp::BinaryOp::Max: return f([](vf x, vf t) { return max(t, x); });
    case PostOp::BinaryOp::Min: return f([](vf x, vf t) { return min(t, x); });
    case PostOp::BinaryOp::Div: return;  // x / t to the last bit: scalar
  }
}
#endif

}  // namespace

PostOpPass::PostOpPass(const Node& node, const std::vector<PostOp>& ops, KernelContext& ctx, const Dims& out)
    : ops_(ops), operands_(ops.size()) {
  if (!out.empty()) {
    lead_.assign(out.begin(), out.end() - 1);
    cols_ = out.back();
    rows_ = numel_of(lead_);
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!ops_[i].takes_input()) continue;
    const Tensor* a = &ctx.in(ops_[i].input);
    const Dims ad = addend_dims(node, a->dims(), out);
    if (a->dtype() != DType::Float) {
      converted_.push_back(to_float(*a, ctx.allocator()));
      a = &converted_.back();
    }
    const Dims st = broadcast_strides(ad, out);
    Operand& t = operands_[i];
    t.data = a->data<float>();
    if (out.empty()) continue;
    t.col_stride = st.back();
    t.lead_strides.assign(st.begin(), st.end() - 1);
    // One row stride when the operand steps evenly as the row index does: each leading dim's stride (dims of
    // size 1 never step) the next inner one's times that one's size; all 0 for a row broadcast to every row.
    int64_t s = -1, expect = 0;
    bool even = true;
    for (size_t d = lead_.size(); d-- > 0 && even;) {
      if (lead_[d] == 1) continue;
      if (s < 0) expect = s = t.lead_strides[d];
      even = t.lead_strides[d] == expect;
      expect *= lead_[d];
    }
    if (even) t.row_stride = std::max<int64_t>(s, 0);
  }
}

int64_t PostOpPass::row_offset(const Operand& t, int64_t r) const {
  if (t.row_stride >= 0) return r * t.row_stride;
  int64_t off = 0;
  for (size_t d = lead_.size(); d-- > 0;) {
    off += (r % lead_[d]) * t.lead_strides[d];
    r /= lead_[d];
  }
  return off;
}

void PostOpPass::apply_rows(float* y, int64_t r0, int64_t r1) const {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t s0 = 0; s0 < cols_; s0 += kStretch) {
      const int64_t len = std::min(kStretch, cols_ - s0);
      float* x = y + r * cols_ + s0;
      for (size_t i = 0; i < ops_.size(); ++i) {
        const PostOp& op = ops_[i];
        const Operand& t = operands_[i];
        const float* tp = t.data ? t.data + row_offset(t, r) + s0 * t.col_stride : nullptr;
        int64_t j = 0;
#if defined(GAF_SIMD)
        using namespace simd;
        if (!tp) {
          with_vector_eltwise(op, [&](auto fv) {
            simd::map(x, x, len, fv);
            j = len;
          });
        } else {
          with_vector_binary(op, [&](auto fv) {
            if (t.col_stride == 0) {
              const vf b = set1(*tp);
              for (; j + kW <= len; j += kW) storeu(x + j, fv(loadu(x + j), b));
            } else {
              for (; j + kW <= len; j += kW) storeu(x + j, fv(loadu(x + j), loadu(tp + j)));
            }
          });
        }
#endif
        if (!tp)
          for (; j < len; ++j) x[j] = eltwise_ref(op, x[j]);
        else
          for (; j < len; ++j) x[j] = binary_ref(op, x[j], tp[j * t.col_stride]);
      }
    }
}

void PostOpPass::apply(float* y) const {
  if (ops_.empty()) return;
  parallel_for(rows_, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols_)),
               [&](int64_t r0, int64_t r1) { apply_rows(y, r0, r1); });
}

}  // namespace gaf::runtime::dnnl_detail
