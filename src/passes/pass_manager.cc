#include <algorithm>
#include <filesystem>
#include <fstream>

#include "gaf/passes.h"

namespace gaf {

bool PassManager::run(Graph& g, PassContext& ctx, int max_iterations) {
  bool any = false;
  int dump_index = 0;
  for (int it = 0; it < max_iterations; ++it) {
    bool changed = false;
    for (const auto& p : passes_) {
      if (ctx.skip_passes.count(std::string(p->name()))) continue;
      bool c = p->run(g, ctx);
      changed |= c;
      if (c && ctx.verify_each) verify(g);
      if (c && ctx.after_pass) ctx.after_pass(p->name(), g);
      if (c && !ctx.dump_dir.empty()) {
        std::filesystem::create_directories(ctx.dump_dir);
        std::ofstream(std::filesystem::path(ctx.dump_dir) /
                      fmt::format("{:02}_{}.txt", dump_index++, p->name()))
            << g.to_string();
      }
    }
    any |= changed;
    if (!changed) break;
  }
  return any;
}

void PassManager::add_canonicalisation(bool merge_duplicates) {
  add(make_constant_to_initializer());
  add(make_identity_elimination());
  add(make_shape_folding());
  add(make_constant_folding());
  if (merge_duplicates) add(make_common_subexpression_elimination());
  // Shapes ONNX could not infer at import follow from the constants folded above.
  add(make_shape_inference());
}

PassManager PassManager::for_opt_level(int opt_level, std::vector<std::unique_ptr<Pass>> backend_passes) {
  PassManager pm;
  if (opt_level < 1) return pm;
  // Canonicalise first: later matchers see constants folded and duplicates merged.
  pm.add_canonicalisation(true);
  pm.add(make_constant_operand_fold());
  // Sibling merge before Gemm formation: it looks for MatMuls with their bias Adds.
  if (opt_level >= 3) pm.add(make_sibling_matmul_merge());
  pm.add(make_transpose_fold());
  pm.add(make_conv_bn_fold());
  pm.add(make_gemm_bn_fold());
  // Activations as single ops before the backend's convolution rewrites, which take them as epilogues.
  pm.add(make_gelu_recognition());
  pm.add(make_silu_recognition());
  pm.add(make_hard_swish_recognition());
  for (auto& p : backend_passes) pm.add(std::move(p));
  // After the backend's: where channel-scale-fold moved a gate into the projection's weights, only the gates are
  // left.
  pm.add(make_squeeze_excitation_fusion());
  // After transpose folding, which leaves ShuffleNet's channel shuffles channels-last.
  pm.add(make_channel_shuffle_fusion());
  pm.add(make_matmul_add_to_gemm());
  // LayerNorm before RMSNorm: a LayerNorm contains an RMSNorm of its centred input.
  pm.add(make_layer_norm_recognition());
  pm.add(make_rms_norm_recognition());
  pm.add(make_softmax_recognition());
  // After Softmax recognition: a hand-written softmax inside attention is a Softmax by then.
  pm.add(make_attention_fusion());
  // After sibling merge and Gemm formation: one compressed matrix per merged product.
  pm.add(make_weight_compression());
  pm.add(make_dead_code_elimination());
  return pm;
}

std::vector<std::unique_ptr<Pass>> make_channels_last_passes() {
  std::vector<std::unique_ptr<Pass>> out;
  out.push_back(make_batch_norm_affine());
  out.push_back(make_layout_nhwc());
  out.push_back(make_transpose_fold());
  out.push_back(make_conv_winograd());
  // Channels-last by now: a squeeze-excitation gate sits right in front of its projection.
  out.push_back(make_channel_scale_fold());
  out.push_back(make_expand_depthwise_fusion());
  return out;
}

std::vector<std::string> PassManager::known_passes() {
  std::vector<std::string> out;
  for (const std::string& n : for_opt_level(3, make_channels_last_passes()).names())
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

std::unique_ptr<Pass> PassManager::make_pass(std::string_view name) {
  PassManager all = for_opt_level(3, make_channels_last_passes());
  for (auto& p : all.passes_)
    if (p->name() == name) return std::move(p);
  return nullptr;
}

std::vector<std::string> PassManager::names() const {
  std::vector<std::string> n;
  for (const auto& p : passes_) n.emplace_back(p->name());
  return n;
}

}  // namespace gaf
