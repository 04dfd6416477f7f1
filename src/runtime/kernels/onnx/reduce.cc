// Reduce* operators and ArgMax/ArgMin: registration and the kernel that reads axes, keepdims and
// noop_with_empty_axes. The arithmetic lives in reduce_engine.h / reduce_ops.h.
//
// Axes come from the `axes` attribute before ReduceSum-13 and the other Reduce ops' opset 18, from the
// optional second input after. Empty axes reduce everything, unless noop_with_empty_axes is set: then nothing
// is reduced and each element goes through the reduction on its own (ReduceSumSquare squares, ReduceL1 takes
// |x|, ReduceLogSum takes log, ReduceSum/Mean/Max/... copy), as the ONNX specification now states.
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/reduce_ops.h"

namespace gaf::runtime {

namespace {

using rn::ReduceKind;

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const Node& n, ReduceKind kind, int axes_input_since)
      : kind_(kind),
        keepdims_(n.attr_int("keepdims", 1) != 0),
        noop_(n.attr_int("noop_with_empty_axes", 0) != 0),
        axes_from_input_(n.opset >= axes_input_since),
        axes_(n.attr_ints("axes")) {
    GAF_CHECK(!axes_from_input_ || !n.has_attr("axes"),
              "{}: the axes attribute was replaced by the axes input in opset {}; pass the axes as input 1",
              n.describe(), axes_input_since);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    std::vector<int64_t> axes = axes_;
    if (axes_from_input_) {
      axes.clear();
      if (const Tensor* a = ctx.input(1)) {
        GAF_CHECK(a->dtype() == DType::Int64, "{}: axes must be an int64 tensor, got {}", node.describe(),
                  dtype_name(a->dtype()));
        GAF_CHECK(a->rank() <= 1, "{}: axes must be a 1-D tensor, got shape {}", node.describe(),
                  dims_to_string(a->dims()));
        axes = a->to_int_vector();
      }
    }
    std::vector<bool> mask;
    if (axes.empty())
      mask.assign(x.rank(), !noop_);
    else
      mask = rn::axes_mask(axes, x.rank(), node);
    rn::ReduceGeometry g = rn::make_reduce_geometry(x.dims(), mask, keepdims_, node);
    Tensor& y = ctx.allocate_output(0, x.dtype(), g.out_dims);
    switch (kind_) {
      case ReduceKind::Max:
      case ReduceKind::Min:
      case ReduceKind::Prod:
      case ReduceKind::LogSumExp:
        rn::run_extrema_family(node, kind_, g, x, y);
        break;
      default:
        rn::run_sum_family(node, kind_, g, x, y);
        break;
    }
  }

 private:
  ReduceKind kind_;
  bool keepdims_, noop_, axes_from_input_;
  std::vector<int64_t> axes_;
};

void add_reduce(KernelRegistry& r, const char* name, ReduceKind kind, int axes_input_since) {
  r.add(name).set_kernel([kind, axes_input_since](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ReduceKernel>(n, kind, axes_input_since);
  });
}

}  // namespace

void register_reduce_ops(KernelRegistry& r) {
  add_reduce(r, "ReduceSum", ReduceKind::Sum, 13);
  add_reduce(r, "ReduceMean", ReduceKind::Mean, 18);
  add_reduce(r, "ReduceMax", ReduceKind::Max, 18);
  add_reduce(r, "ReduceMin", ReduceKind::Min, 18);
  add_reduce(r, "ReduceProd", ReduceKind::Prod, 18);
  add_reduce(r, "ReduceL1", ReduceKind::L1, 18);
  add_reduce(r, "ReduceL2", ReduceKind::L2, 18);
  add_reduce(r, "ReduceLogSum", ReduceKind::LogSum, 18);
  add_reduce(r, "ReduceLogSumExp", ReduceKind::LogSumExp, 18);
  add_reduce(r, "ReduceSumSquare", ReduceKind::SumSquare, 18);
  rn::register_arg_ops(r);
}

}  // namespace gaf::runtime
