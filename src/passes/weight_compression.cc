// Products with compressed constant weights as one node, gaf.CompressedMatMul(A, W, [scale], trans_b), which
// reads the weights in their stored precision (a decode step streams every weight once: the bytes are the
// time):
//
//   MatMul(A, DequantizeLinear(Wq, s, [0], axis))    Wq int8 [K, N], s per column (axis 1) or per tensor,
//                                                    zero point absent or all zero   (standard ONNX QDQ
//                                                    weights)
//   MatMul(A, Cast(Wb, to = float))                  Wb bfloat16 [K, N]
//   Gemm(A, the same, [C], transB)                   alpha = 1, transA = 0; C (beta = 1) added after
//   MatMul / Gemm(A, W) with W fp32 [K, N]           with the rules' precision_mode "bf16_mixed" (W rounded
//   to
//                                                    bfloat16) or "int8_weights" (symmetric per-column int8,
//                                                    s = max |w| / 127), for W of at least 64K elements
//
// Does not fire on: a zero point other than 0, a scale along K, weights read at run time, A other than fp32,
// small weights in precision_mode (a few KB gain nothing and lose precision). Constant folding leaves the
// DequantizeLinear / Cast of such weights alone (it would store them as fp32).
#include <algorithm>
#include <cmath>
#include <optional>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;

constexpr int64_t kMinCompressedElements = int64_t(1) << 16;

struct Compressed {
  Value* w = nullptr;        // int8 or bfloat16 constant, [K, N] or [N, K]
  Value* scale = nullptr;    // int8: float [N] or scalar
  std::vector<Node*> nodes;  // the DequantizeLinear / Cast in between
};

// B as stored weights: DequantizeLinear(int8 const, float const scale per column or tensor, zero point 0) or
// Cast(bfloat16 const, to float). `cols_axis`: which axis of the stored W holds the N output columns.
std::optional<Compressed> compressed_weights(const Graph& g, Value* b, int cols_axis, std::string* why) {
  Node* p = b->producer();
  if (is_op(p, "DequantizeLinear")) {
    const Tensor* w = rewrite::constant_of(g, p->input(0));
    const Tensor* s = rewrite::constant_of(g, p->input(1));
    if (!w || w->dtype() != DType::Int8 || w->rank() != 2) {
      *why =
          fmt::format("{} dequantises '{}', not a constant int8 matrix", p->describe(), p->input(0)->name());
      return std::nullopt;
    }
    if (!s || s->dtype() != DType::Float) {
      *why = fmt::format("{}: the scale is not a float constant", p->describe());
      return std::nullopt;
    }
    if (p->input(2)) {
      const Tensor* z = rewrite::constant_of(g, p->input(2));
      bool zero = z != nullptr;
      for (int64_t i = 0; zero && i < z->numel(); ++i) zero = z->get_int(i) == 0;
      if (!zero) {
        *why = fmt::format("{}: the zero point is not 0 (asymmetric weights)", p->describe());
        return std::nullopt;
      }
    }
    int64_t axis = p->attr_int("axis", 1);
    if (axis < 0) axis += 2;
    if (s->numel() != 1 && (axis != cols_axis || s->numel() != w->dim(cols_axis))) {
      *why =
          fmt::format("{}: the scale runs along the reduced axis, not one per output column", p->describe());
      return std::nullopt;
    }
    return Compressed{p->input(0), p->input(1), {p}};
  }
  if (is_op(p, "Cast") && p->attr_int("to", 0) == int64_t(DType::Float)) {
    const Tensor* w = rewrite::constant_of(g, p->input(0));
    if (w && w->dtype() == DType::BFloat16 && w->rank() == 2) return Compressed{p->input(0), nullptr, {p}};
  }
  return std::nullopt;
}

class WeightCompression final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "weight-compression"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& n) override {
    Graph& g = rw.graph();
    const bool gemm = is_op(&n, "Gemm");
    if (!is_op(&n, "MatMul") && !gemm) return false;
    Value* a = n.input(0);
    Value* b = n.input(1);
    if (!rewrite::is_float(a) || a->type.dtype != DType::Float || rewrite::rank_of(a) < 1) return false;
    const bool tb = gemm && n.attr_int("transB", 0) != 0;
    if (gemm && (n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.f) != 1.f ||
                 (n.input(2) && n.attr_float("beta", 1.f) != 1.f)))
      return false;
    std::string why;
    std::optional<Compressed> c = compressed_weights(g, b, tb ? 0 : 1, &why);
    if (!c && b->producer() && is_op(b->producer(), "DequantizeLinear")) return miss(n, "{}", why);
    if (!c) c = compress(rw, b, tb);
    if (!c) return false;
    Node* mm = rw.add_node("CompressedMatMul",
                           c->scale ? std::vector<Value*>{a, c->w, c->scale} : std::vector<Value*>{a, c->w},
                           {n.output(0)}, rewrite::kGafDomain, 1);
    if (tb) mm->attrs["trans_b"] = int64_t(1);
    Value* y = mm->output(0);
    if (gemm && n.input(2)) {
      Node* add = rw.add_node("Add", {y, n.input(2)}, {n.output(0)}, "", n.opset);
      y = add->output(0);
    }
    rw.replace(n.output(0), y);
    std::vector<Node*> gone = {&n};
    gone.insert(gone.end(), c->nodes.begin(), c->nodes.end());
    rw.erase_unused(gone);
    // The fp32 weights, read by nothing now, go at once rather than with the round's dead values: compressing a
    // decoder would otherwise hold every fp32 matrix and its compressed copy together (the 174 MB GPT-2-style
    // decoder in bf16: 268 MB at the peak).
    rw.drop_if_unused(b);
    return true;
  }

  // fp32 constant weights compressed as the rules' precision_mode asks.
  std::optional<Compressed> compress(rewrite::Rewriter& rw, Value* b, bool tb) {
    const std::string& mode = context().weight_precision;
    const Tensor* w = rewrite::constant_of(rw.graph(), b);
    if (mode.empty() || !w || w->dtype() != DType::Float || w->rank() != 2 ||
        w->numel() < kMinCompressedElements)
      return std::nullopt;
    const float* src = w->data<float>();
    if (mode == "bf16") {
      Tensor t(DType::BFloat16, w->dims(), Allocator::weights());
      uint16_t* dst = static_cast<uint16_t*>(t.raw());
      for (int64_t i = 0; i < w->numel(); ++i) dst[i] = float_to_bf16(src[i]);
      return Compressed{rw.add_constant(b->name() + "_bf16", std::move(t)), nullptr, {}};
    }
    // int8: per output column, s = max |w| / 127, q = round(w / s)
    const int64_t rows = w->dim(0), cols = w->dim(1), n = tb ? rows : cols;
    std::vector<float> amax(size_t(n), 0.f);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float& m = amax[size_t(tb ? i : j)];
        m = std::max(m, std::abs(src[i * cols + j]));
      }
    Tensor scale(DType::Float, {n});
    for (int64_t j = 0; j < n; ++j)
      scale.data<float>()[j] = amax[size_t(j)] > 0 ? amax[size_t(j)] / 127.f : 1.f;
    Tensor q(DType::Int8, w->dims(), Allocator::weights());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const float s = scale.data<float>()[tb ? i : j];
        q.data<int8_t>()[i * cols + j] =
            int8_t(std::clamp(std::nearbyint(src[i * cols + j] / s), -127.f, 127.f));
      }
    return Compressed{rw.add_constant(b->name() + "_int8", std::move(q)),
                      rw.add_constant(b->name() + "_scale", std::move(scale)),
                      {}};
  }
};

}  // namespace

std::unique_ptr<Pass> make_weight_compression() { return std::make_unique<WeightCompression>(); }

}  // namespace gaf
