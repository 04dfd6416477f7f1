// Constants and shape queries: Constant, ConstantOfShape, Shape, Size, Range, EyeLike; and the ops that pass
// their input through at inference: Identity, Dropout.
#include <cmath>
#include <limits>

#include "runtime/kernels/onnx/misc_util.h"

namespace gaf::runtime {

namespace {

template <class T>
void fill_parallel(T* p, int64_t n, T v) {
  parallel_for(n, kElemGrain, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
}

// ---- Constant: the value is built once, when the session compiles; every run hands out the same tensor.
// ----

class ConstantKernel final : public Kernel {
 public:
  explicit ConstantKernel(const Node& n) {
    static const char* kNames[] = {"value",      "value_float",  "value_floats",  "value_int",
                                   "value_ints", "value_string", "value_strings", "sparse_value"};
    int count = 0;
    for (const char* a : kNames) count += n.has_attr(a);
    GAF_CHECK(count == 1, "{}: a Constant needs exactly one of the value attributes, it has {}", n.describe(),
              count);
    if (n.has_attr("sparse_value")) {
      unsupported("{}: sparse_value constants are not supported; store the value as a dense tensor",
                  n.describe());
    } else if (const Tensor* t = n.has_attr("value") ? n.attr_tensor("value") : nullptr) {
      value_ = *t;
    } else if (n.has_attr("value_float")) {
      value_ = Tensor::scalar<float>(n.attr_float("value_float", 0.f));
    } else if (n.has_attr("value_floats")) {
      auto v = n.attr_floats("value_floats");
      value_ = Tensor::from<float>({int64_t(v.size())}, v);
    } else if (n.has_attr("value_int")) {
      value_ = Tensor::scalar<int64_t>(n.attr_int("value_int", 0));
    } else if (n.has_attr("value_ints")) {
      auto v = n.attr_ints("value_ints");
      value_ = Tensor::from<int64_t>({int64_t(v.size())}, v);
    } else if (n.has_attr("value_string")) {
      value_ = Tensor(DType::String, {});
      value_.strings()[0] = n.attr_string("value_string", "");
    } else {
      const auto* v = std::get_if<std::vector<std::string>>(&n.attrs.at("value_strings"));
      GAF_CHECK(v, "{}: attribute 'value_strings' has the wrong type", n.describe());
      value_ = Tensor(DType::String, {int64_t(v->size())});
      for (size_t i = 0; i < v->size(); ++i) value_.strings()[i] = (*v)[i];
    }
    GAF_CHECK(value_.defined(), "{}: attribute 'value' has the wrong type", n.describe());
  }
  void run(KernelContext& ctx) override { ctx.set_output(0, value_); }

 private:
  Tensor value_;
};

// ---- ConstantOfShape ----

class ConstantOfShapeKernel final : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const Node& n) {
    if (const Tensor* t = n.has_attr("value") ? n.attr_tensor("value") : nullptr) {
      GAF_CHECK(t->numel() == 1, "{}: attribute 'value' must hold exactly one element, it has {}",
                n.describe(), t->numel());
      GAF_CHECK(t->dtype() != DType::String, "{}: attribute 'value' must be numeric or bool", n.describe());
      value_ = *t;
    } else {
      value_ = Tensor::scalar<float>(0.f);
    }
  }
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor& shape = ctx.in(0);
    GAF_CHECK(shape.rank() == 1 && is_integer(shape.dtype()),
              "{}: the shape input must be a 1-D integer tensor, got {}{}", n.describe(),
              dtype_name(shape.dtype()), dims_to_string(shape.dims()));
    std::vector<int64_t> dims = shape.to_int_vector();
    for (int64_t d : dims)
      GAF_CHECK(d >= 0, "{}: the requested shape {} has a negative dimension", n.describe(),
                dims_to_string(dims));
    Tensor& out = ctx.allocate_output(0, value_.dtype(), dims);
    visit_dtype(value_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      fill_parallel(out.data<T>(), out.numel(), value_.data<T>()[0]);
    });
  }

 private:
  Tensor value_;
};

// ---- Shape, Size ----

void shape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t rank = x.rank();
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(ctx.node().attr_int("start", 0));
  int64_t end = ctx.node().has_attr("end") ? clamp(ctx.node().attr_int("end", rank)) : rank;
  int64_t n = std::max<int64_t>(end - start, 0);
  Tensor& out = ctx.allocate_output(0, DType::Int64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = x.dim(int(start + i));
}

void size_kernel(KernelContext& ctx) {
  ctx.allocate_output(0, DType::Int64, {}).data<int64_t>()[0] = ctx.in(0).numel();
}

// ---- Range: output[i] = start + i * delta, count = max(ceil((limit - start) / delta), 0) ----

template <class T>
int64_t range_count(T start, T limit, T delta, const Node& n) {
  GAF_CHECK(delta != T(0), "{}: delta must not be zero", n.describe());
  int64_t count;
  if constexpr (std::is_floating_point_v<T>) {
    T c = std::ceil((limit - start) / delta);
    GAF_CHECK(std::isfinite(c), "{}: start {}, limit {} and delta {} do not give a finite element count",
              n.describe(), start, limit, delta);
    GAF_CHECK(c <= T(int64_t(1) << 40), "{}: {} elements is too many for a Range", n.describe(), c);
    count = c > 0 ? int64_t(c) : 0;
  } else {
    __int128 diff = __int128(limit) - __int128(start), d = delta;
    __int128 c = d > 0 ? (diff > 0 ? (diff + d - 1) / d : 0) : (diff < 0 ? (diff + d + 1) / d : 0);
    count = int64_t(c);
  }
  return count;
}

void range_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor &s = ctx.in(0), &l = ctx.in(1), &d = ctx.in(2);
  GAF_CHECK(s.dtype() == l.dtype() && s.dtype() == d.dtype(),
            "{}: start, limit and delta must have one element type, got {}, {}, {}", n.describe(),
            dtype_name(s.dtype()), dtype_name(l.dtype()), dtype_name(d.dtype()));
  for (const Tensor* t : {&s, &l, &d})
    GAF_CHECK(t->numel() == 1 && t->rank() <= 1, "{}: start, limit and delta must be scalars, got shape {}",
              n.describe(), dims_to_string(t->dims()));
  auto go = [&](auto tag) {
    using T = decltype(tag);
    T start = s.data<T>()[0], limit = l.data<T>()[0], delta = d.data<T>()[0];
    int64_t count = range_count(start, limit, delta, n);
    T* out = ctx.allocate_output(0, s.dtype(), {count}).template data<T>();
    parallel_for(count, kElemGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = T(start + T(i) * delta);
    });
  };
  switch (s.dtype()) {
    case DType::Float:
      go(float{});
      break;
    case DType::Double:
      go(double{});
      break;
    case DType::Int16:
      go(int16_t{});
      break;
    case DType::Int32:
      go(int32_t{});
      break;
    case DType::Int64:
      go(int64_t{});
      break;
    default:
      unsupported("{}: Range of element type {} is not supported", n.describe(), dtype_name(s.dtype()));
  }
}

// ---- Identity, Dropout (inference) ----

void identity_kernel(KernelContext& ctx) { ctx.set_output(0, ctx.in(0)); }

class DropoutKernel final : public Kernel {
 public:
  explicit DropoutKernel(const Node& n) : opset_(n.opset) {
    if (n.opset < 12) ratio_attr_ = n.attr_float("ratio", 0.5f);
    // Dropout-1/6 run in training mode unless is_test is set; later versions take training_mode as an input.
    if (n.opset < 7) training_attr_ = n.attr_int("is_test", 0) == 0;
    want_mask_ = n.num_outputs() > 1 && !n.output(1)->absent_output;
  }
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor& x = ctx.in(0);
    bool training = training_attr_;
    double ratio = ratio_attr_;
    if (opset_ >= 12) {
      if (const Tensor* t = ctx.input(2)) training = scalar_input(*t, n, "training_mode") != 0;
      ratio = 0.5;
      if (const Tensor* r = ctx.input(1)) ratio = scalar_input(*r, n, "ratio");
    }
    if (training && ratio != 0) {
      unsupported(
          "{}: training-mode Dropout (ratio {}) is random and not supported at inference; "
          "export the model in eval mode",
          n.describe(), ratio);
    }
    ctx.set_output(0, x);
    if (!want_mask_) return;
    // The mask is bool from opset 10 on; before that it has the data's element type.
    DType mask_type = opset_ >= 10 ? DType::Bool : x.dtype();
    Tensor& mask = ctx.allocate_output(1, mask_type, x.dims());
    visit_dtype(mask_type, [&](auto tag) {
      using T = decltype(tag);
      fill_parallel(mask.data<T>(), mask.numel(), from_double<T>(1.0));
    });
  }

 private:
  int opset_;
  float ratio_attr_ = 0.5f;
  bool training_attr_ = false;
  bool want_mask_ = false;
};

// ---- EyeLike ----

void eyelike_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.in(0);
  GAF_CHECK(x.rank() == 2, "{}: the input must be 2-D, got shape {}", n.describe(), dims_to_string(x.dims()));
  DType dt = x.dtype();
  if (n.has_attr("dtype")) {
    dt = DType(n.attr_int("dtype", 1));
    if (dt == DType::Undefined || dtype_size(dt) == 0)
      unsupported("{}: dtype {} is not a supported element type", n.describe(), int(dt));
  }
  const int64_t rows = x.dim(0), cols = x.dim(1), k = n.attr_int("k", 0);
  Tensor& out = ctx.allocate_output(0, dt, {rows, cols}, /*zero=*/true);
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T one = from_double<T>(1.0);
    for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i) o[i * cols + i + k] = one;
  });
}

}  // namespace

void register_misc_basic_ops(KernelRegistry& r) {
  r.add("Constant").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ConstantKernel>(n);
  });
  r.add("ConstantOfShape").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ConstantOfShapeKernel>(n);
  });
  r.add("Shape").set_kernel(strided_fn_kernel(shape_kernel));
  r.add("Size").set_kernel(strided_fn_kernel(size_kernel));
  r.add("Range").set_kernel(fn_kernel(range_kernel));
  r.add("EyeLike").set_kernel(fn_kernel(eyelike_kernel));
  r.add("Identity").set_kernel(fn_kernel(identity_kernel));  // tensors, sequences and optionals alike
  r.add("Dropout").set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<DropoutKernel>(n); });
}

}  // namespace gaf::runtime
