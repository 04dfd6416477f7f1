// Where(condition, X, Y): three-way numpy broadcast. Pure selection, so it moves elements by size (1, 2, 4 or
// 8 bytes) whatever their type, and strings by copy.
#include <string>

#include "runtime/kernels/onnx/elementwise_util.h"

namespace gaf::runtime::ew {

namespace {

// Both values are loaded before the select (`c ? x[i] : y[i]` makes the loads conditional), and the condition
// is read as bytes (GCC 12 does not vectorise bool -> wider integer conversions): the flat loops vectorise.
template <class T>
inline T pick(uint8_t c, const T& x, const T& y) {
  return c != 0 ? x : y;
}

template <class T>
void where_row(const uint8_t* c, int64_t sc, const T* x, int64_t sx, const T* y, int64_t sy, T* o,
               int64_t n) {
  if (sc == 1 && sx == 1 && sy == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], x[i], y[i]);
  } else if (sc == 1 && sx == 0 && sy == 1) {
    const T xv = x[0];
    for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], xv, y[i]);
  } else if (sc == 1 && sx == 1 && sy == 0) {
    const T yv = y[0];
    for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], x[i], yv);
  } else if (sc == 1 && sx == 0 && sy == 0) {
    const T xv = x[0], yv = y[0];
    for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i], xv, yv);
  } else if (sc == 0) {
    const T* src = c[0] ? x : y;
    const int64_t ss = c[0] ? sx : sy;
    if (ss == 1)
      std::copy(src, src + n, o);
    else
      for (int64_t i = 0; i < n; ++i) o[i] = src[i * ss];
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = pick(c[i * sc], x[i * sx], y[i * sy]);
  }
}

template <class T>
void where_typed(const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out, int64_t grain) {
  auto plan = plan_broadcast<3>(out.dims(), {&c.dims(), &x.dims(), &y.dims()});
  const uint8_t* pc = reinterpret_cast<const uint8_t*>(c.data<bool>());
  const T* px = static_cast<const T*>(x.raw());
  const T* py = static_cast<const T*>(y.raw());
  T* po = static_cast<T*>(out.raw());
  broadcast_run(
      plan, grain,
      [&](int64_t pos, const std::array<int64_t, 3>& offs, int64_t run, const std::array<int64_t, 3>& inner) {
        where_row(pc + offs[0], inner[0], px + offs[1], inner[1], py + offs[2], inner[2], po + pos, run);
      });
}

void where_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& c = ctx.in(0);
  const Tensor& x = ctx.in(1);
  const Tensor& y = ctx.in(2);
  GAF_CHECK(c.dtype() == DType::Bool, "{}: condition must be bool, got {}", n.describe(),
            dtype_name(c.dtype()));
  GAF_CHECK(x.dtype() == y.dtype(), "{}: X is {} but Y is {}", n.describe(), dtype_name(x.dtype()),
            dtype_name(y.dtype()));
  std::vector<int64_t> shapes[3] = {c.dims(), x.dims(), y.dims()};
  std::vector<int64_t> out_dims = broadcast_shape(std::span<const std::vector<int64_t>>(shapes, 3), n);
  Tensor& out = ctx.allocate_output(0, x.dtype(), out_dims);
  if (x.dtype() == DType::String) {
    where_typed<std::string>(c, x, y, out, 1024);
    return;
  }
  switch (dtype_size(x.dtype())) {
    case 1:
      where_typed<uint8_t>(c, x, y, out, 32768);
      break;
    case 2:
      where_typed<uint16_t>(c, x, y, out, 32768);
      break;
    case 4:
      where_typed<uint32_t>(c, x, y, out, 32768);
      break;
    case 8:
      where_typed<uint64_t>(c, x, y, out, 32768);
      break;
    default:
      unsupported("{}: element type {} is not supported", n.describe(), dtype_name(x.dtype()));
  }
}

}  // namespace

void register_where_op(KernelRegistry& r) { r.add("Where").set_kernel(fn_kernel(where_kernel)); }

}  // namespace gaf::runtime::ew
