// ArgMax / ArgMin: int64 indices along one axis (axis, keepdims, select_last_index).
#include "runtime/kernels/onnx/reduce_arg.h"

#include "runtime/kernels/onnx/reduce_ops.h"

namespace gaf::runtime::rn {

namespace {

template <bool IsMax, bool Last, class T>
void arg_typed(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner) {
  using C = compute_t<T>;
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
      std::vector<C> buf(is_f16_v<T> ? static_cast<size_t>(n) : 0);
      for (int64_t o = b; o < e; ++o) y[o] = arg_row<IsMax, Last>(as_compute(x + o * n, n, buf.data()), n);
    });
    return;
  }
  const int64_t chunk = std::min<int64_t>(inner, 1024);
  const int64_t per = (inner + chunk - 1) / chunk;
  parallel_for(outer * per, std::max<int64_t>(1, kGrain / (n * chunk)), [&](int64_t b, int64_t e) {
    C best[1024], buf[is_f16_v<T> ? 1024 : 1];
    for (int64_t p = b; p < e; ++p) {
      const int64_t o = p / per, j0 = (p % per) * chunk, cnt = std::min(chunk, inner - j0);
      const T* xo = x + o * n * inner + j0;
      int64_t* idx = y + o * inner + j0;
      const C* q0 = as_compute(xo, cnt, buf);
      for (int64_t j = 0; j < cnt; ++j) {
        best[j] = q0[j];
        idx[j] = 0;
      }
      for (int64_t i = 1; i < n; ++i)
        arg_cols_step<IsMax, Last>(as_compute(xo + i * inner, cnt, buf), cnt, i, best, idx);
    }
  });
}

class ArgKernel final : public Kernel {
 public:
  ArgKernel(const Node& n, bool is_max)
      : is_max_(is_max),
        axis_(n.attr_int("axis", 0)),
        keepdims_(n.attr_int("keepdims", 1) != 0),
        last_(n.attr_int("select_last_index", 0) != 0) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    GAF_CHECK(x.rank() >= 1, "{}: the input must have rank >= 1, got a scalar", node.describe());
    GAF_CHECK(axis_ >= -x.rank() && axis_ < x.rank(), "{}: axis {} is out of range for an input of rank {}",
              node.describe(), axis_, x.rank());
    const int axis = int(axis_ < 0 ? axis_ + x.rank() : axis_);
    const int64_t outer = dims_product(x.dims(), 0, axis), n = x.dim(axis),
                  inner = dims_product(x.dims(), axis + 1, x.rank());
    std::vector<int64_t> out_dims = x.dims();
    if (keepdims_)
      out_dims[axis] = 1;
    else
      out_dims.erase(out_dims.begin() + axis);
    Tensor& y = ctx.allocate_output(0, DType::Int64, out_dims);
    if (y.numel() == 0) return;
    GAF_CHECK(n > 0, "{}: cannot take {} along axis {} of size 0 (input shape {})", node.describe(),
              node.op_type, axis, dims_to_string(x.dims()));
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        unsupported("{}: element type bool is not supported", node.describe());
      } else {
        const T* xp = x.data<T>();
        int64_t* yp = y.data<int64_t>();
        if (is_max_) {
          if (last_)
            arg_typed<true, true>(xp, yp, outer, n, inner);
          else
            arg_typed<true, false>(xp, yp, outer, n, inner);
        } else {
          if (last_)
            arg_typed<false, true>(xp, yp, outer, n, inner);
          else
            arg_typed<false, false>(xp, yp, outer, n, inner);
        }
      }
    });
  }

 private:
  bool is_max_;
  int64_t axis_;
  bool keepdims_, last_;
};

}  // namespace

void register_arg_ops(KernelRegistry& r) {
  for (bool is_max : {true, false}) {
    r.add(is_max ? "ArgMax" : "ArgMin").set_kernel([is_max](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<ArgKernel>(n, is_max);
    });
  }
}

}  // namespace gaf::runtime::rn
