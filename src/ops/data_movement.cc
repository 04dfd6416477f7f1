// Data movement: no arithmetic (flops 0) but memory traffic. kIndexable ops fold into a fused kernel's index
// arithmetic; the other injective ops (Gather, Pad, Tile...) run alone.
#include "gaf/tensor.h"
#include "ops/ops.h"

namespace gaf::ops {

namespace {

void movement(OpRegistry& r, const char* name, OpKind kind = OpKind::Injective, uint32_t flags = kNone,
              const char* domain = "") {
  r.add(name, kind, domain).set_flags(flags).set_flops_per_element(0);
}

// Resize / Upsample: the interpolation's arithmetic per output element.
double resize_flops(const Node& n) {
  const Value* y = n.output(0);
  if (!y->type.has_static_shape()) return 0;
  const std::string mode = n.attr_string("mode", "nearest");
  const double per = mode == "cubic" ? 32 : mode == "linear" ? 8 : 0;
  return per * double(numel_of(y->type.static_dims()));
}

}  // namespace

void register_data_movement_ops(OpRegistry& r) {
  for (const char* name : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    movement(r, name, OpKind::Injective, kIndexable | kView);
  for (const char* name : {"Transpose", "Concat", "Split", "Slice", "Expand"})
    movement(r, name, OpKind::Injective, kIndexable);
  for (const char* name : {"Tile", "Pad", "ReverseSequence", "DepthToSpace", "SpaceToDepth", "Gather",
                           "GatherElements", "GatherND", "Trilu"})
    movement(r, name);
  // Data-dependent writes and outputs: no fusion.
  for (const char* name :
       {"ScatterElements", "Scatter", "ScatterND", "OneHot", "Compress", "EyeLike", "ConstantOfShape"})
    movement(r, name, OpKind::Opaque);
  movement(r, "ChannelShuffle", OpKind::Opaque, kNone, "gaf");
  r.add("Resize", OpKind::Injective).set_flops(resize_flops);
  r.add("Upsample", OpKind::Injective).set_flops(resize_flops);
}

}  // namespace gaf::ops
