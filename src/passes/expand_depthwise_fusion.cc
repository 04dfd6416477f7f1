// An expansion 1x1 convolution and the depthwise convolution that reads it become one op, so the expanded
// activation (MobileNet-style blocks widen by 6x: 112x112x96 is 4.8 MB) is never written to memory:
//
//   d = gaf.Conv<NHWC, group E, KxK, stride s>(act1(gaf.Conv<NHWC, 1x1>(x, W1, B1)), W2, B2); y = act2(d)
//     ==>   y = gaf.ExpandDepthwiseConv<strides, pads, min1, max1, activation1, min2, ...>(x, W1, B1, W2, B2)
//
// act1 and act2 are each Relu, Clip with constant bounds (min/max attributes), gaf.Silu, HardSwish (ONNX's or
// gaf's: the activation attributes), or nothing. The runtime kernel (expand_depthwise.h)
// computes the expanded rows the depthwise window needs into a ring buffer that stays in cache; the written model
// decomposes the op back into the two convolutions (decompose_gaf_ops).
// Conditions: W1 [E, C, 1, 1] and W2 [E, 1, K, K] constant fp32 (biases constant or absent), K 3 or 5, strides
// s x s with s 1 or 2, dilations 1, explicit pads below K; the expansion's result and act1's read only by the next
// op of the pattern and not graph outputs; where the kernel measured slower than the convolutions apart
// (fused_kernel_pays), only when the target asks for it everywhere. Runs when the target has the fused kernel
// (Target::conv_expand_depthwise).
#include <cmath>
#include <limits>
#include <string>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::all_equal;
using rewrite::constant_of;
using rewrite::Stage;
using rewrite::stage_of;

// The fused kernel computes the expansion on PointwiseConv's register tiles, which beat oneDNN 2.6's 1x1
// convolution up to 64 input channels and lose beyond (MobileNetV2's 96 -> 576 expansion and 3x3 at 14x14:
// 0.13 ms apart, 0.14-0.15 ms fused).
constexpr int64_t kMaxExpansionInputs = 64;

// Where the fused kernel loses to the two convolutions apart, measured block by block (bench/block_bench.cc,
// fused / apart, 2 threads): at stride 2 with a 5x5 window (MobileNetV3-small and EfficientNet-B0 blocks:
// 1.19-1.31x) and at stride 2 with SiLU or HardSwish (EfficientNet-B0: 1.03-1.07x); at stride 2 with clamps it
// gains (MobileNetV2: 0.87-0.94x), at stride 1 it gains or ties (0.79-1.00x).
bool fused_kernel_pays(int64_t stride, int64_t k, const std::string& act1, const std::string& act2) {
  return stride == 1 || (k == 3 && act1.empty() && act2.empty());
}

bool nhwc_conv(const Node* n) {
  return n && n->op_type == "Conv" && n->domain == rewrite::kGafDomain && n->attr_string("layout", "") == "NHWC" &&
         !n->has_attr("algorithm") && n->attr_string("auto_pad", "NOTSET") == "NOTSET";
}

// A constant fp32 tensor of exactly these dims, or null.
const Tensor* constant_dims(const Graph& g, const Value* v, const std::vector<int64_t>& dims) {
  const Tensor* t = v ? constant_of(g, v) : nullptr;
  return t && t->dtype() == DType::Float && t->dims() == dims ? t : nullptr;
}

class ExpandDepthwiseFusion final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "expand-depthwise-fusion"; }

 private:
  bool enabled(const PassContext& ctx) const override { return ctx.conv_expand_depthwise; }

  bool rule(rewrite::Rewriter& rw, Node& dw) override {
    Graph& g = rw.graph();
    if (!nhwc_conv(&dw) || !dw.input(0) || !dw.input(1)) return false;
    const Tensor* w2 = constant_of(g, dw.input(1));
    if (!w2 || w2->dtype() != DType::Float || w2->rank() != 4) return false;
    const int64_t e = w2->dim(0), k = w2->dim(2);
    if (dw.attr_int("group", 1) != e || w2->dim(1) != 1 || w2->dim(3) != k || (k != 3 && k != 5)) return false;
    const std::vector<int64_t> strides = dw.attr_ints("strides", {1, 1}), pads = dw.attr_ints("pads", {0, 0, 0, 0});
    if (strides.size() != 2 || strides[0] != strides[1] || (strides[0] != 1 && strides[0] != 2)) return false;
    if (!all_equal(dw.attr_ints("dilations", {1, 1}), 1) || pads.size() != 4) return false;
    for (int64_t p : pads)
      if (p < 0 || p >= k) return false;
    if (dw.input(2) && !constant_dims(g, dw.input(2), {e})) return false;

    // Backwards: the optional activation, then the expansion.
    Value* a = dw.input(0);
    Node* act1 = a->producer();
    std::optional<Stage> s1 = stage_of(g, act1);
    if (s1) {
      if (rewrite::sole_user(g, a) != &dw || g.is_graph_output(a)) return false;
      a = act1->input(0);
    } else {
      act1 = nullptr;
      s1 = Stage{};
    }
    Node* pw = a ? a->producer() : nullptr;
    if (!nhwc_conv(pw) || pw->attr_int("group", 1) != 1 || !pw->input(0) || !pw->input(1)) return false;
    if (rewrite::sole_user(g, a) != (act1 ? act1 : &dw) || g.is_graph_output(a)) return false;
    if (!all_equal(pw->attr_ints("strides", {1, 1}), 1) || !all_equal(pw->attr_ints("dilations", {1, 1}), 1) ||
        !all_equal(pw->attr_ints("pads", {0, 0, 0, 0}), 0))
      return false;
    Value* x = pw->input(0);
    if (!rewrite::is_float(x) || rewrite::rank_of(x) != 4) return false;
    const Tensor* w1 = constant_of(g, pw->input(1));
    if (!w1 || w1->dtype() != DType::Float || w1->rank() != 4 || w1->dim(0) != e || w1->dim(2) != 1 ||
        w1->dim(3) != 1 || w1->dim(1) > kMaxExpansionInputs)
      return false;
    if (pw->input(2) && !constant_dims(g, pw->input(2), {e})) return false;

    // Forwards: an activation of the depthwise result joins when it is that result's only reader.
    Value* result = dw.output(0);
    Node* act2 = rewrite::sole_user(g, result);
    std::optional<Stage> s2 = g.is_graph_output(result) || !act2 || act2->input(0) != result
                                  ? std::nullopt
                                  : stage_of(g, act2);
    if (s2) result = act2->output(0);
    else s2 = Stage{};
    if (!context().conv_expand_depthwise_everywhere && !fused_kernel_pays(strides[0], k, s1->act, s2->act)) return false;

    auto bias = [&](Value* b, const std::string& base) {
      return b ? b : rw.add_constant(base, Tensor::from<float>({e}, std::vector<float>(size_t(e), 0.f)));
    };
    std::vector<Value*> ins = {x, pw->input(1), bias(pw->input(2), pw->output(0)->name() + "_bias"), dw.input(1),
                               bias(dw.input(2), dw.output(0)->name() + "_bias")};
    Node* fused = rw.add_node("ExpandDepthwiseConv", ins, {result}, rewrite::kGafDomain, 1);
    fused->attrs["strides"] = strides;
    fused->attrs["pads"] = pads;
    if (std::isfinite(s1->lo)) fused->attrs["min1"] = s1->lo;
    if (std::isfinite(s1->hi)) fused->attrs["max1"] = s1->hi;
    if (!s1->act.empty()) fused->attrs["activation1"] = s1->act;
    if (std::isfinite(s2->lo)) fused->attrs["min2"] = s2->lo;
    if (std::isfinite(s2->hi)) fused->attrs["max2"] = s2->hi;
    if (!s2->act.empty()) fused->attrs["activation2"] = s2->act;
    rw.replace(result, fused->output(0));
    std::vector<Node*> pattern = {&dw, pw};
    if (act1) pattern.push_back(act1);
    if (act2 && result == act2->output(0)) pattern.insert(pattern.begin(), act2);
    rw.erase_unused(pattern);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_expand_depthwise_fusion() { return std::make_unique<ExpandDepthwiseFusion>(); }

}  // namespace gaf
