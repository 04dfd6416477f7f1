// Channels-last convolutions and pools for the CPU runtime:
//
//   Conv(x, w, b)   ->   Transpose(gaf.Conv<layout = "NHWC">(Transpose(x, [0,2,3,1]), w, b), [0,3,1,2])
//   MaxPool(x), AveragePool(x) likewise (gaf.MaxPool, gaf.AveragePool; not a MaxPool whose indices are read)
//   GlobalAveragePool(x) -> Transpose(ReduceMean(Transpose(x, [0,2,3,1]), axes = [1, 2], keepdims), [0,3,1,2])
//   GlobalMaxPool(x) likewise with ReduceMax
//
// The global pools matter for squeeze-excitation blocks (EfficientNet, MobileNetV3): the pooled branch's 1x1
// convolutions and the channel scale Mul then stay channels-last too, and the Transposes cancel; a standard
// ReduceMean is also a reduction the code generator fuses with the activation before it.
// oneDNN's fast CPU convolutions work on channels-last (or blocked) activations; on NCHW tensors every Conv pays a
// reorder in and out (resnet18: ~40 reorders, ~1.5 ms of 9.5), and 1x1 convolutions fall back to a slower
// gemm-based kernel. The Transposes this pass adds between consecutive convolutions cancel in transpose folding,
// which also moves them down through the elementwise ops in between (ReLU, Clip, residual Add), so a chain of
// convolutions runs channels-last end to end and only the chain's entry and exit transpose.
//
// 2-D fp32 convolutions (constant weights) and pools of known rank; symbolic dims are fine (a dynamic batch): the
// kernels plan per input shape. A rewrite of the CPU runtime's layout: run at opt level 2 and above, with the
// rest of the CPU-specific decisions (fusion).
#include <functional>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

using rewrite::is_op;

TensorType permuted(const TensorType& t, const std::vector<int64_t>& perm) {
  TensorType r = t;
  Shape s;
  for (int64_t a : perm) s.push_back((*t.shape)[size_t(a)]);
  r.shape = s;
  return r;
}

class LayoutNhwc final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "layout-nhwc"; }

 private:
  bool rule(rewrite::Rewriter& rw, Node& conv) override {
    if (is_op(&conv, "GlobalAveragePool") || is_op(&conv, "GlobalMaxPool")) return global_pool(rw, conv);
    const bool is_conv = is_op(&conv, "Conv");
    if (!is_conv && !is_op(&conv, "MaxPool") && !is_op(&conv, "AveragePool")) return false;
    for (int k = 1; k < conv.num_outputs(); ++k)  // MaxPool's indices are NCHW positions: leave those pools
      if (!conv.output(k)->absent_output) return false;
    const Value* x = conv.input(0);
    const Value* y = conv.output(0);
    if (!rewrite::is_float(x) || rewrite::rank_of(x) != 4 || rewrite::rank_of(y) != 4) return false;
    if (is_conv && (!conv.input(1) || !conv.input(1)->is_constant())) return false;
    for (int64_t p : conv.attr_ints("pads"))  // negative pads: configurations oneDNN may not take
      if (p < 0) return false;
    channels_last(rw, conv, [&](Value* x_nhwc) {
      std::vector<Value*> ins = {x_nhwc};
      for (int i = 1; i < conv.num_inputs(); ++i) ins.push_back(conv.input(i));
      while (!ins.empty() && !ins.back()) ins.pop_back();
      Node* c = rw.add_node(conv.op_type, ins, {y}, rewrite::kGafDomain, 1);
      c->attrs = conv.attrs;
      c->attrs["layout"] = std::string("NHWC");
      return c;
    });
    return true;
  }

  // GlobalAveragePool / GlobalMaxPool of a rank-4 fp32 tensor: ReduceMean / ReduceMax over the NHWC spatial axes.
  static bool global_pool(rewrite::Rewriter& rw, Node& pool) {
    const Value* y = pool.output(0);
    if (!rewrite::is_float(pool.input(0)) || rewrite::rank_of(pool.input(0)) != 4 || rewrite::rank_of(y) != 4)
      return false;
    const std::vector<int64_t> axes = {1, 2};
    const int opset = pool.opset;
    channels_last(rw, pool, [&](Value* x_nhwc) {
      std::vector<Value*> ins = {x_nhwc};
      if (opset >= 18) ins.push_back(rw.add_constant(y->name() + "_axes", Tensor::from<int64_t>({2}, axes)));
      Node* r = rw.add_node(is_op(&pool, "GlobalAveragePool") ? "ReduceMean" : "ReduceMax", ins, {y}, "", opset);
      if (opset < 18) r->attrs["axes"] = axes;
      r->attrs["keepdims"] = int64_t(1);
      return r;
    });
    return true;
  }

  // n(x, ...) -> Transpose(inner(Transpose(x, [0,2,3,1]), ...), [0,3,1,2]): `make` builds inner from the NHWC
  // input; its output is typed here.
  static void channels_last(rewrite::Rewriter& rw, Node& n, const std::function<Node*(Value*)>& make) {
    const std::vector<int64_t> to_nhwc = {0, 2, 3, 1}, to_nchw = {0, 3, 1, 2};
    const Value* x = n.input(0);
    const Value* y = n.output(0);
    Node* in = rw.add_node("Transpose", {n.input(0)}, {x}, "", n.opset);
    in->attrs["perm"] = to_nhwc;
    in->output(0)->type = permuted(x->type, to_nhwc);
    Node* inner = make(in->output(0));
    inner->output(0)->type = permuted(y->type, to_nhwc);
    Node* out = rw.add_node("Transpose", {inner->output(0)}, {y}, "", n.opset);
    out->attrs["perm"] = to_nchw;
    rw.replace(n.output(0), out->output(0));
    rw.erase_unused({&n});
  }
};

}  // namespace

std::unique_ptr<Pass> make_layout_nhwc() { return std::make_unique<LayoutNhwc>(); }

}  // namespace gaf
