// Moves a per-channel scale of a convolution's input into its weights when that touches fewer elements
// (squeeze-excitation: the block's activations times a gate per channel, then a 1x1 projection):
//
//   Conv(Mul(x, s), W, B)   ==>   Conv(x, Mul(W, s'), B)        s per input channel, one batch image
//
// conv(x * s)[m] = sum_c W[m, c] * s[c] * x[c] (for every tap; zero padding stays zero), so W'[m, c, k...] =
// W[m, c, k...] * s[c]. s is usually computed at run time (the gate), so W' is too: a small Mul on the weights
// and the runtime's per-run weight reorder, instead of a pass that reads and writes all of x. It pays when
//   numel(x) >= 2 numel(W) + 131072
// (the weights are read and written twice, the activation once each way; the constant covers the two extra
// launches and the reorder: with 32768, MobileNetV3-small's 56x56x16 gate moved and ran 1.4% slower).
// EfficientNet-B0's gates on 112x112x32, 56x56x96/144 and 28x28x240 maps move; those on 7x7x1152 do not.
// A constant s needs no run-time work: constant folding then makes W' a constant.
// Conditions: Conv (NCHW) or gaf.Conv with layout NHWC, group 1, W constant and float; x of static shape with one
// image (N = 1); s broadcasting as [1, C, 1...] in x's layout (NHWC: [1, 1..., C]); the Mul read only by the Conv.
#include <algorithm>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

class ChannelScaleFold final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "channel-scale-fold"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& conv) override {
    Graph& g = rw.graph();
    if (conv.op_type != "Conv" || (!conv.domain.empty() && conv.domain != rewrite::kGafDomain)) return false;
    const bool nhwc = conv.attr_string("layout", "NCHW") == "NHWC";
    if (!conv.domain.empty() && !nhwc) return false;
    if (conv.attr_int("group", 1) != 1 || !conv.input(1)) return false;
    const Tensor* w = rewrite::constant_of(g, conv.input(1));
    if (!w || w->dtype() != DType::Float || w->rank() < 3) return false;
    Node* mul = conv.input(0) ? conv.input(0)->producer() : nullptr;
    if (!rewrite::is_op(mul, "Mul") || rewrite::sole_user(g, mul->output(0)) != &conv) return false;
    const Value* z = mul->output(0);
    if (!rewrite::is_float(z) || !z->type.has_static_shape()) return false;
    const std::vector<int64_t> zd = z->type.static_dims();
    const int rank = int(zd.size());
    if (rank != w->rank() || zd[0] != 1) return false;
    const int caxis = nhwc ? rank - 1 : 1;
    const int64_t c = zd[size_t(caxis)];
    if (w->dim(1) != c) return false;
    // Which operand is the activation (z's shape) and which the per-channel scale.
    for (int i = 0; i < 2; ++i) {
      Value* x = mul->input(i);
      Value* s = mul->input(1 - i);
      if (!x || !s || !rewrite::same_shape(x, z) || !rewrite::is_float(s) || !s->type.has_static_shape()) continue;
      std::vector<int64_t> sd = s->type.static_dims();
      if (int(sd.size()) > rank) continue;
      sd.insert(sd.begin(), size_t(rank) - sd.size(), 1);
      bool per_channel = true;
      for (int a = 0; a < rank; ++a) per_channel &= sd[size_t(a)] == (a == caxis ? c : 1);
      if (!per_channel) continue;
      // numel(x) >= 2 numel(W) + 131072: scaling the weights reads and writes fewer elements.
      if (double(numel_of(zd)) < 2.0 * double(w->numel()) + 131072.0) return false;
      // s as [1, C, 1...]: it then broadcasts over W [M, C, k...] along C.
      std::vector<int64_t> sw(size_t(rank), 1);
      sw[1] = c;
      Value* shape = rw.add_constant(s->name() + "_as_weights_shape", Tensor::from<int64_t>({rank}, sw));
      Node* reshape = rw.add_node("Reshape", {s, shape}, {conv.input(1)}, "", std::max(mul->opset, 14));
      reshape->output(0)->type.shape = Shape(sw.begin(), sw.end());
      Node* scaled = rw.add_node("Mul", {conv.input(1), reshape->output(0)}, {conv.input(1)}, "", mul->opset);
      std::vector<Value*> ins = {x, scaled->output(0)};
      for (int k = 2; k < conv.num_inputs(); ++k) ins.push_back(conv.input(k));
      Node* out = rw.add_node("Conv", ins, {conv.output(0)}, conv.domain, conv.opset);
      out->attrs = conv.attrs;
      rw.replace(conv.output(0), out->output(0));
      rw.erase_unused({&conv, mul});
      return true;
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_channel_scale_fold() { return std::make_unique<ChannelScaleFold>(); }

}  // namespace gaf
