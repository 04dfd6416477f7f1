// Graph passes. A pass is a name (also its `opt --passes` and `--dump-after=` name) and run(graph) -> changed. The
// PassManager builds the pipeline for an opt level, counts rewrites per pass for the report, optionally dumps the
// graph after each pass and verifies it between passes in debug builds.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gaf/cost.h"
#include "gaf/graph.h"

namespace gaf {

// A pattern a recognition pass started to match and gave up on: the node it starts from and the check that
// failed, for `explain` (why is this attention not fused?).
struct NearMiss {
  std::string pass;
  std::string anchor;  // the node the pattern starts from, as Node::describe() names it
  std::string check;   // what did not hold, naming the values and nodes involved
};

// How passes compute a node's outputs from constant inputs (constant folding, a constant transposed in place). The
// runtime provides one (runtime::constant_evaluator(): the node run alone, so folding uses the kernels inference
// would) and the driver installs it in PassContext::evaluator; with none, nothing is evaluated.
class ConstantEvaluator {
 public:
  virtual ~ConstantEvaluator() = default;
  // Whether there is a kernel for n's op.
  virtual bool can_evaluate(const Node& n) const = 0;
  // n's outputs computed from `inputs` (one per input of n, null where n's input is absent). Throws gaf::Error when
  // the kernel rejects them (UnsupportedError when there is no kernel).
  virtual std::vector<Tensor> evaluate(const Node& n, const std::vector<const Tensor*>& inputs) const = 0;
};

struct PassContext {
  int opt_level = 2;
  const ConstantEvaluator* evaluator = nullptr;  // nullptr: no node is evaluated (nothing is constant-folded)
  std::map<std::string, int> rewrites;  // pass name -> rewrites applied (for the report)
  std::string dump_dir;                 // when set: <dump_dir>/<NN>_<pass>.txt after each pass that changed
  // When set: called after each pass that changed the graph (graph-autofusion opt --dump-after).
  std::function<void(std::string_view pass, const Graph& g)> after_pass;
  bool verify_each = false;
  bool conv_winograd = false;           // the target runs Winograd convolutions and the rules allow them
  bool conv_expand_depthwise = false;   // the target runs gaf.ExpandDepthwiseConv (Target::conv_expand_depthwise)
  bool conv_expand_depthwise_everywhere = false;  // also where it measured slower (Target's, for measuring)
  const Target* target = nullptr;       // for rewrites that weigh a benefit (nullptr: Target::cpu_host())
  std::set<std::string> skip_passes;    // passes the PassManager leaves out (the rules' "skip_passes")
  std::string weight_precision;         // "bf16" or "int8": the rules' precision_mode for constant weights
  std::vector<std::string> precision_changes;  // what a precision pass stored narrower, a line each (the report)
  // Near misses by pass and anchor: the latest sweep's word; an anchor that is rewritten later is cleared.
  std::map<std::pair<std::string, std::string>, NearMiss> near_misses;
  void count(std::string_view pass, int n = 1) { rewrites[std::string(pass)] += n; }
  void near_miss(std::string_view pass, const Node& anchor, std::string check) {
    NearMiss m{std::string(pass), anchor.describe(), std::move(check)};
    near_misses.insert_or_assign({m.pass, m.anchor}, std::move(m));
  }
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual bool run(Graph& g, PassContext& ctx) = 0;
};

class PassManager {
 public:
  void add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  // Runs the pipeline to a fixed point (at most `max_iterations` sweeps). Returns whether anything changed.
  bool run(Graph& g, PassContext& ctx, int max_iterations = 32);
  // The canonicalisation and rewrite pipeline of an opt level (empty at 0). `backend_passes`: what the target's
  // backend adds (KernelBackend::pipeline_passes: the CPU's channels-last layout and convolution algorithms), run
  // after BatchNorm folding and activation recognition, before the fusions that match the layout they leave.
  static PassManager for_opt_level(int opt_level, std::vector<std::unique_ptr<Pass>> backend_passes = {});
  // The canonicalisation every pipeline starts with: constants to initializers, identities removed, shapes and
  // constants folded, [duplicates merged,] shapes inferred. for_opt_level begins with it (merging duplicates), and
  // the CUDA backend's unfused reference runs it alone (without merging: an unfused model keeps its nodes).
  void add_canonicalisation(bool merge_duplicates);
  std::vector<std::string> names() const;
  // Every rewrite pass by name (each once: the pipeline's and the channels-last ones); the pass of that name
  // (nullptr when there is none).
  static std::vector<std::string> known_passes();
  static std::unique_ptr<Pass> make_pass(std::string_view name);

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

// Individual passes (one per file in src/passes/).
// gaf-domain ops -> standard ONNX (graph and fused bodies), for models written for other runtimes. Returns the
// number of nodes decomposed.
int decompose_gaf_ops(Graph& g, int opset);

// The driver's steps around the ONNX frontend (gaf/onnx_io.h), whose import and export only translate.
// After reading a model: our shape inference inside each fused body of g. A gaf.fused function comes back typed by
// ONNX's inference and its call site, which leave dims unknown that the code generator sizes its loops by.
void infer_fused_body_shapes(Graph& g);
// Before writing a model other runtimes read: the model with our gaf-domain ops decomposed into standard ONNX
// (decompose_gaf_ops), the values they produce typed (shape inference) and the "gaf" opset dropped; fused groups
// stay gaf.fused functions. A model without gaf-domain ops is portable as it is and is not copied.
//   onnx_io::save_model(PortableModel(m), path);
class PortableModel {
 public:
  explicit PortableModel(const Model& m);
  operator const Model&() const { return copy_ ? *copy_ : model_; }

 private:
  const Model& model_;
  std::optional<Model> copy_;
};

std::unique_ptr<Pass> make_constant_to_initializer();  // Constant nodes -> initializers
std::unique_ptr<Pass> make_identity_elimination();     // Identity, inference Dropout -> their input
std::unique_ptr<Pass> make_dead_code_elimination();    // nodes whose outputs nobody reads

// Canonicalisation.
std::unique_ptr<Pass> make_constant_folding();                  // all-constant nodes -> initializers
std::unique_ptr<Pass> make_common_subexpression_elimination();  // identical nodes, constants -> one
std::unique_ptr<Pass> make_shape_folding();                     // Shape/Size of static shapes, Reshape chains
std::unique_ptr<Pass> make_constant_operand_fold();  // Op(Reshape(x), c) read back in x's shape, Add(Add(x, c1), c2)
// Folding into anchors.
std::unique_ptr<Pass> make_conv_bn_fold();          // Conv -> BatchNorm / per-channel Mul, Add -> Conv
std::unique_ptr<Pass> make_gemm_bn_fold();          // 2-D MatMul/Gemm -> BatchNorm / per-column Mul -> Gemm
std::unique_ptr<Pass> make_batch_norm_affine();     // BatchNorm left alone -> x * s + t (per-channel constants)
std::unique_ptr<Pass> make_matmul_add_to_gemm();    // 2-D MatMul + constant bias -> Gemm
std::unique_ptr<Pass> make_shape_inference();      // fills shapes ONNX left unknown, from folded constants
std::unique_ptr<Pass> make_transpose_fold();       // Transposes into Gemm flags, pairs, constants
std::unique_ptr<Pass> make_layout_nhwc();          // Conv -> channels-last gaf.Conv between Transposes (CPU)
std::unique_ptr<Pass> make_channel_scale_fold();    // Conv(Mul(x, s per channel), W) -> Conv(x, W * s) when cheaper
std::unique_ptr<Pass> make_expand_depthwise_fusion();  // 1x1 expansion + depthwise gaf.Conv -> gaf.ExpandDepthwiseConv
std::unique_ptr<Pass> make_squeeze_excitation_fusion();  // pool, 1x1 convs, gate, Mul -> gaf.SqueezeExcitation
std::unique_ptr<Pass> make_channel_shuffle_fusion();  // Concat -> channel shuffle -> even Slices -> gaf.ChannelShuffle
std::unique_ptr<Pass> make_conv_winograd();        // 3x3 stride-1 gaf.Conv -> algorithm = "winograd" when it pays
// What a backend whose convolutions run channels-last adds to the pipeline (KernelBackend::pipeline_passes, the
// CPU's): BatchNorms no anchor absorbed as multiply-adds, convolutions NHWC between Transposes that transpose
// folding cancels between neighbours, then the algorithms and blocks that need that layout (Winograd,
// channel-scale-fold, expand-depthwise-fusion).
std::vector<std::unique_ptr<Pass>> make_channels_last_passes();
std::unique_ptr<Pass> make_sibling_matmul_merge();  // MatMuls sharing an input -> MatMul + Split
// Recognition of decomposed ops.
std::unique_ptr<Pass> make_layer_norm_recognition();  // mean/variance chain -> LayerNormalization
std::unique_ptr<Pass> make_rms_norm_recognition();    // x / sqrt(mean(x^2) + eps) -> gaf.RMSNormalization
std::unique_ptr<Pass> make_gelu_recognition();        // erf and tanh forms -> gaf.Gelu
std::unique_ptr<Pass> make_silu_recognition();        // x * Sigmoid(x) -> gaf.Silu
std::unique_ptr<Pass> make_hard_swish_recognition();  // x * HardSigmoid(x), x * Relu6(x + 3) / 6
std::unique_ptr<Pass> make_softmax_recognition();     // Exp(x - ReduceMax) / ReduceSum -> Softmax
// MatMul(Q, Kt) -> scale -> [+ mask] -> Softmax -> MatMul(., V), head transposes included -> gaf.Attention
std::unique_ptr<Pass> make_attention_fusion();
// MatMul/Gemm reading int8 (QDQ) or bfloat16 weights, or fp32 ones under precision_mode bf16_mixed/int8_weights
// -> gaf.CompressedMatMul
std::unique_ptr<Pass> make_weight_compression();
// Float products (MatMul/Gemm/Conv) and the ops between them on `storage` (bfloat16 or float16), precision-sensitive
// ops and those the backend runs in fp32 only kept float, casts at the boundaries (a backend's precision_passes;
// once, after the pipeline).
struct StoragePolicy {
  std::function<bool(const Node&)> float_only;  // ops the backend runs on fp32 operands only
  // The inputs an op reads narrow though it is precision-sensitive (fp32 math inside); empty: none.
  std::function<std::vector<int>(const Node&)> narrow_inputs;
  // Ops that follow their data input's storage (the backend computes them in fp32 inside and rounds once, or only
  // moves values): on T where that input is T, like the T-propagating ops, though precision-sensitive. Null: none.
  std::function<bool(const Node&)> follows_storage;
};
std::unique_ptr<Pass> make_low_precision_storage(DType storage, StoragePolicy policy);

}  // namespace gaf
