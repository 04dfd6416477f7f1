// SiLU (Swish with beta 1) as exporters write it:  Mul(x, Sigmoid(x)) in either operand order -> gaf.Silu(x).
// ONNX has no SiLU/Swish op in the opsets we read, so the result is in domain gaf (CPU kernel in
// runtime/kernels/onnx/gaf_ops.cc). The Sigmoid output must be read only by the Mul; fp32 only.
#include "gaf/passes.h"
#include "passes/rewrite_util.h"

namespace gaf {

namespace {

class SiluRecognition final : public rewrite::RulePass {
 public:
  std::string_view name() const override { return "silu-recognition"; }

 private:
  // Mul(x, Sigmoid(x)) -> gaf.Silu(x)
  bool rule(rewrite::Rewriter& rw, Node& sigmoid) override {
    Graph& g = rw.graph();
    if (!rewrite::is_op(&sigmoid, "Sigmoid")) return false;
    Value* x = sigmoid.input(0);
    Node* mul = rewrite::sole_user(g, sigmoid.output(0));
    if (!rewrite::is_op(mul, "Mul") || rewrite::other_operand(mul, sigmoid.output(0)) != x ||
        !rewrite::is_float(x))
      return false;
    Node* silu = rw.add_node("Silu", {x}, {mul->output(0)}, rewrite::kGafDomain, 1);
    rw.replace(mul->output(0), silu->output(0));
    rw.erase_unused({mul, &sigmoid});
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_silu_recognition() { return std::make_unique<SiluRecognition>(); }

}  // namespace gaf
