// Winograd convolutions for the CPU runtime:
//
//   gaf.Conv<layout = "NHWC">(x, w[M, C, 3, 3], b), strides 1, dilations 1, group 1
//     -> the same node with algorithm = "winograd"   (F(2x2 or 4x4, 3x3): 2.25-4x fewer multiplies)
//
// The transform works on 2x2 or 4x4 output tiles: input tiles and weights go to the Winograd domain, products are
// summed there (a batched GEMM over channels) and transformed back. fp32 throughout; the result differs from a
// direct convolution by rounding of the order of a changed summation order (measured: max |diff| 5e-6 on outputs
// of magnitude 3). oneDNN computes it in a blocked layout, so each such convolution also pays a reorder in and
// out, and the input and output transforms cost per channel what the product saves per pair of channels:
//   winograd pays when C >= 32, M >= 64, the output has >= 196 pixels (14x14) and the direct convolution is
//   >= 10 MFLOP
// (measured, 2 threads, reorders included; Zen 4: 64ch 56x56 1.64x, 128ch 28x28 2.2x, 512ch 7x7 1.2x, 64ch 14x14
// 1.17x; 64ch 7x7 (3.6 MFLOP) 0.73x, 16->32ch 28x28 (7 MFLOP) 0.89x, 3->32ch 224x224 0.21x. Sapphire Rapids:
// 96->128ch 28x28 1.48x, 128->192ch 28x28 1.65x, 256ch 14x14 1.5x, 32->64ch 56x56 1.15x, 512ch 7x7 1.0x, 64ch
// 14x14 0.93x; with 32 output channels it loses: 128->32ch 56x56 0.92x, 64->32ch 0.91x, 32ch 0.94x, DenseNet-121's
// growth convolutions 0.6-0.85x; with 16 input channels too: SqueezeNet's 16->64ch 54x54 0.85x, 32->128ch 27x27
// 1.15x). Its weights are 16/9 the direct ones; at 7x7 each is used only 49 times and streaming them dominates:
// ResNet-50's last stage ran 1.05 ms per 512ch 3x3 convolution against 0.99 direct in the whole network (though
// 1.0x in isolation).
//
// Runs when the target has Winograd convolutions (Target::conv_winograd) and the rules allow them ("winograd").
// The kernel falls back to the direct algorithm when oneDNN has no Winograd implementation for the node (another
// ISA, an epilogue it cannot fuse); the decomposed model drops the attribute.
#include <algorithm>

#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

class ConvWinograd final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "conv-winograd"; }

 private:
  bool enabled(const PassContext& ctx) const override { return ctx.conv_winograd; }

  bool rule(rewrite::Rewriter&, Node& conv) override {
    if (conv.op_type != "Conv" || conv.domain != rewrite::kGafDomain || conv.has_attr("algorithm")) return false;
    if (conv.attr_string("layout", "") != "NHWC" || conv.attr_int("group", 1) != 1) return false;
    if (!rewrite::all_equal(conv.attr_ints("strides"), 1) || !rewrite::all_equal(conv.attr_ints("dilations"), 1))
      return false;
    const Value* x = conv.input(0);
    const Value* w = conv.input(1);
    const Value* y = conv.output(0);
    if (!rewrite::is_float(x) || !w || !w->type.has_static_shape() || rewrite::rank_of(y) != 4) return false;
    const Shape& ws = *w->type.shape;
    if (ws.size() != 4 || ws[2].value() != 3 || ws[3].value() != 3) return false;
    const Shape& ys = *y->type.shape;  // [N, OH, OW, M]
    if (!ys[1].is_static() || !ys[2].is_static()) return false;
    const int64_t n = ys[0].is_static() ? ys[0].value() : 1;  // a symbolic batch: at least one image
    const int64_t m = ws[0].value(), c = ws[1].value();
    const double flops = 2.0 * double(n * ys[1].value() * ys[2].value()) * double(m * c * 9);
    if (c < 32 || m < 64 || ys[1].value() * ys[2].value() < 196 || flops < 10e6) return false;
    conv.attrs["algorithm"] = std::string("winograd");
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_conv_winograd() { return std::make_unique<ConvWinograd>(); }

}  // namespace gaf
