// Binary ops with numpy broadcasting: arithmetic, Pow, Mod, comparison, logic, BitShift, PRelu. One templated
// kernel (BinaryKernel<Op>) handles shapes, dtype dispatch and the legacy (opset < 7) broadcast attributes;
// the op functor only computes one element on compute types. The variadic ops, Where and Cast live in
// elementwise_{variadic,where,cast}.cc and are registered from here.
#include <cmath>

#include "ops/simd_math.h"
#include "runtime/kernels/onnx/elementwise_util.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace {

using namespace ew;

// Opset < 7 binary ops broadcast only with broadcast=1: B (rank <= A's) is aligned with A's dimensions
// starting at `axis` (default: B's trailing dimensions match A's), and the output has A's shape. Returns B's
// dims padded to A's rank so the numpy machinery can read it.
std::vector<int64_t> legacy_b_dims(const Node& n, const Tensor& a, const Tensor& b) {
  if (n.attr_int("broadcast", 0) == 0) {
    GAF_CHECK(a.dims() == b.dims(),
              "{}: inputs have shapes {} and {}; before opset 7 they must be equal unless broadcast=1",
              n.describe(), dims_to_string(a.dims()), dims_to_string(b.dims()));
    return b.dims();
  }
  const int ra = a.rank(), rb = b.rank();
  int64_t axis = ra - rb;
  if (n.has_attr("axis")) {
    axis = n.attr_int("axis", 0);
    if (axis < 0) axis += ra;
  }
  GAF_CHECK(rb <= ra && axis >= 0 && axis + rb <= ra,
            "{}: with broadcast=1, B of shape {} must fit into A of shape {} at axis {}", n.describe(),
            dims_to_string(b.dims()), dims_to_string(a.dims()), axis);
  std::vector<int64_t> d(ra, 1);
  for (int i = 0; i < rb; ++i) {
    int64_t bd = b.dim(i), ad = a.dim(int(axis) + i);
    GAF_CHECK(bd == ad || bd == 1, "{}: B of shape {} does not broadcast to A of shape {} (axis {})",
              n.describe(), dims_to_string(b.dims()), dims_to_string(a.dims()), axis);
    d[axis + i] = bd;
  }
  return d;
}

// Shapes of a binary op: the dims to read each operand with and the output dims.
struct BinaryShapes {
  std::vector<int64_t> a, b, out;
};

BinaryShapes binary_shapes(const Node& n, const Tensor& a, const Tensor& b, bool legacy) {
  if (legacy && n.opset < 7) return {a.dims(), legacy_b_dims(n, a, b), a.dims()};
  return {a.dims(), b.dims(), broadcast_shape(a.dims(), b.dims(), n)};
}

// Sets the op's ErrorFlag (ops that can fault on integer data have `ErrorFlag* err`).
template <class Op>
Op with_flag(const Op& op, ErrorFlag& flag) {
  Op o = op;
  if constexpr (requires { o.err; }) o.err = &flag;
  return o;
}
template <class Op>
void check_flag(const Op&, const ErrorFlag& flag, const Node& n) {
  if constexpr (requires { Op::kFault; }) {
    GAF_CHECK(!flag.set.load(), "{}: {}", n.describe(), Op::kFault);
  }
}

template <class Op>
class BinaryKernel final : public Kernel {
 public:
  explicit BinaryKernel(const Node& n)
      : op_(make_op<Op>(n)), grain_(grain_for(find_op(n)->flops_per_element)) {}
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor& a = ctx.in(0);
    const Tensor& b = ctx.in(1);
    GAF_CHECK(a.dtype() == b.dtype(), "{}: inputs have different element types ({} and {})", n.describe(),
              dtype_name(a.dtype()), dtype_name(b.dtype()));
    BinaryShapes s = binary_shapes(n, a, b, Op::kLegacyBroadcast);
    dispatch<Op::kTypes>(a.dtype(), n, "input", [&](auto tag) {
      using S = decltype(tag);
      using SO = std::conditional_t<bool_out<Op>(), bool, S>;
      if constexpr (requires { op_.template check<S>(n); }) op_.template check<S>(n);
      Tensor& y = ctx.allocate_output(0, DTypeOf<SO>::value, s.out);
      ErrorFlag flag;
      binary_broadcast(a.data<S>(), s.a, b.data<S>(), s.b, y.data<SO>(), s.out, with_flag(op_, flag), grain_);
      check_flag(op_, flag, n);
    });
  }

 private:
  Op op_;
  int64_t grain_;  // from the op's flops per element (src/ops)
};

template <class Op>
void add_binary(KernelRegistry& r, const char* name) {
  r.add(name).set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<BinaryKernel<Op>>(n); });
}

// ---- arithmetic ---------------------------------------------------------------------------------

// Signed integer overflow wraps (two's complement) instead of being undefined.
struct AddOp {
  static constexpr unsigned kTypes = kTNumeric;
  static constexpr bool kLegacyBroadcast = true;
  template <class C>
  C operator()(C a, C b) const {
    return add_wrap(a, b);
  }
};

struct SubOp {
  static constexpr unsigned kTypes = kTNumeric;
  static constexpr bool kLegacyBroadcast = true;
  template <class C>
  C operator()(C a, C b) const {
    return sub_wrap(a, b);
  }
};

struct MulOp {
  static constexpr unsigned kTypes = kTNumeric;
  static constexpr bool kLegacyBroadcast = true;
  template <class C>
  C operator()(C a, C b) const {
    return mul_wrap(a, b);
  }
};

// Integer division truncates toward zero (C semantics); MIN / -1 wraps; division by zero is an error.
struct DivOp {
  static constexpr unsigned kTypes = kTNumeric;
  static constexpr bool kLegacyBroadcast = true;
  static constexpr const char* kFault = "integer division by zero";
  ErrorFlag* err = nullptr;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return a / b;
    } else {
      if (b == 0) {
        err->raise();
        return 0;
      }
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return neg_wrap(a);
      }
      return C(a / b);
    }
  }
};

// fmod=0 (integers only): the result takes the divisor's sign (Python's %). fmod=1: the dividend's sign (C's
// fmod / %). A zero divisor is an error for integers; floats follow fmod (NaN).
struct ModOp {
  static constexpr unsigned kTypes = kTNumeric;
  static constexpr bool kLegacyBroadcast = false;
  static constexpr const char* kFault = "integer modulo by zero";
  bool fmod = false;
  ErrorFlag* err = nullptr;
  ModOp() = default;
  explicit ModOp(const Node& n) : fmod(n.attr_int("fmod", 0) != 0) {}
  template <class S>
  void check(const Node& n) const {
    GAF_CHECK(
        fmod || !std::is_floating_point_v<compute_t<S>>,
        "{}: Mod of floating-point inputs requires fmod=1 (the ONNX spec leaves fmod=0 undefined for them)",
        n.describe());
  }
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::fmod(a, b);
    } else {
      if (b == 0) {
        err->raise();
        return 0;
      }
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return 0;  // avoids MIN % -1, which traps
        C r = C(a % b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = C(r + b);
        return r;
      } else {
        return C(a % b);
      }
    }
  }
};

// ---- comparison and logic -----------------------------------------------------------------------

#define GAF_COMPARE_OP(Name, types, legacy, expr)    \
  struct Name {                                      \
    static constexpr unsigned kTypes = types;        \
    static constexpr bool kBoolOut = true;           \
    static constexpr bool kLegacyBroadcast = legacy; \
    template <class C>                               \
    bool operator()(C a, C b) const {                \
      return expr;                                   \
    }                                                \
  };
GAF_COMPARE_OP(EqualOp, kTAll, true, a == b)
GAF_COMPARE_OP(LessOp, kTNumeric, true, a < b)
GAF_COMPARE_OP(LessOrEqualOp, kTNumeric, false, a <= b)
GAF_COMPARE_OP(GreaterOp, kTNumeric, true, a > b)
GAF_COMPARE_OP(GreaterOrEqualOp, kTNumeric, false, a >= b)
GAF_COMPARE_OP(AndOp, kTBool, true, a&& b)
GAF_COMPARE_OP(OrOp, kTBool, true, a || b)
GAF_COMPARE_OP(XorOp, kTBool, true, a != b)
#undef GAF_COMPARE_OP

// Shifts of `bits` or more give 0.
struct BitShiftOp {
  static constexpr unsigned kTypes = kTUnsigned;
  static constexpr bool kLegacyBroadcast = false;
  bool left = true;
  BitShiftOp() = default;
  explicit BitShiftOp(const Node& n) {
    std::string d = n.attr_string("direction", "");
    GAF_CHECK(d == "LEFT" || d == "RIGHT",
              "{}: attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"{}\"", n.describe(), d);
    left = d == "LEFT";
  }
  template <class C>
  C operator()(C a, C b) const {
    if (b >= C(sizeof(C) * 8)) return 0;
    return left ? C(a << b) : C(a >> b);
  }
};

// ---- Pow ----------------------------------------------------------------------------------------

// Integer base ** integer exponent by squaring, wrapping on overflow. Negative exponents truncate 1/base^-e
// toward zero (only 1 and -1 give non-zero results); 0 ** negative is an error.
template <class A, class B>
A int_pow(A base, B e, ErrorFlag* err) {
  if constexpr (std::is_signed_v<B>) {
    if (e < 0) {
      if (base == 0) {
        err->raise();
        return 0;
      }
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<A>) {
        if (base == -1) return (e & 1) ? A(-1) : A(1);
      }
      return 0;
    }
  }
  using W = wrap_t<A>;
  W result = 1, b = W(base);
  uint64_t n = uint64_t(e);
  while (n) {
    if (n & 1) result = W(result * b);
    b = W(b * b);
    n >>= 1;
  }
  return A(result);
}

// Base type T (floats, int32, int64) and exponent type T1 (any numeric) may differ; the result has T's type.
struct PowOp {
  static constexpr const char* kFault = "integer 0 raised to a negative power";
  ErrorFlag* err = nullptr;
  template <class A, class B>
  A operator()(A x, B y) const {
    if constexpr (std::is_floating_point_v<A>) {
      using W = std::common_type_t<A, B>;
      return A(std::pow(W(x), W(y)));
    } else if constexpr (std::is_integral_v<B>) {
      return int_pow(x, y, err);
    } else {
      return saturate_cast<A>(std::pow(double(x), double(y)));
    }
  }
  // fp32 base and exponent, each contiguous or one value: simd::powv, whole vectors then the last lanes
  // (masked-off lanes read 1). libm's powf per element was ~55 ms over 16M elements on 2 cores.
  template <class A, class B, class O>
  bool row(const A* a, int64_t sa, const B* b, int64_t sb, O* o, int64_t n) const {
#if defined(GAF_SIMD)
    if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float> && std::is_same_v<O, float>) {
      if (sa > 1 || sb > 1 || (sa == 0 && sb == 0)) return false;
      auto operand = [](const float* p, int64_t s, int64_t i, simd::lanes_t m) {
        return s == 0 ? simd::set1(p[0]) : simd::select(m, simd::loadu(p + i, m), simd::set1(1.f));
      };
      int64_t i = 0;
      for (; i + simd::kW <= n; i += simd::kW) {
        const simd::vf x = sa == 0 ? simd::set1(a[0]) : simd::loadu(a + i);
        const simd::vf y = sb == 0 ? simd::set1(b[0]) : simd::loadu(b + i);
        simd::storeu(o + i, simd::powv(x, y));
      }
      if (i < n) {
        const simd::lanes_t m = simd::first(n - i);
        simd::storeu(o + i, simd::powv(operand(a, sa, i, m), operand(b, sb, i, m)), m);
      }
      return true;
    }
#endif
    (void)a, (void)sa, (void)b, (void)sb, (void)o, (void)n;
    return false;
  }
};

// Pow with one scalar exponent of a common value on floating data: plain arithmetic instead of pow(). The
// exponent is a template parameter so that each loop is a straight vectorisable map.
enum class PowKind { Zero, One, Two, Three, Half, MinusOne };
template <PowKind K>
struct PowScalarOp {
  template <class C>
  C operator()(C x) const {
    if constexpr (K == PowKind::Zero)
      return C(1);
    else if constexpr (K == PowKind::One)
      return x;
    else if constexpr (K == PowKind::Two)
      return x * x;
    else if constexpr (K == PowKind::Three)
      return x * x * x;
    else if constexpr (K == PowKind::MinusOne)
      return C(1) / x;
    else
      return x == -std::numeric_limits<C>::infinity() ? std::numeric_limits<C>::infinity()
                                                      : std::sqrt(x) + C(0);
  }
  // x^0.5 through the SIMD square root (std::sqrt stays scalar): pow(-0, .5) = +0 and pow(-inf, .5) = inf.
  template <class C>
  void range(const C* in, C* out, int64_t n) const requires(K == PowKind::Half) {
    sqrt_range(in, out, n);
    constexpr C inf = std::numeric_limits<C>::infinity();
    for (int64_t i = 0; i < n; ++i) out[i] = (in[i] == -inf ? inf : out[i]) + C(0);
  }
};

class PowKernel final : public Kernel {
 public:
  explicit PowKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor& x = ctx.in(0);
    const Tensor& y = ctx.in(1);
    BinaryShapes s = binary_shapes(n, x, y, true);
    constexpr unsigned kBase = kTFloating | kTSigned | kTUnsigned;
    dispatch<kBase>(x.dtype(), n, "base", [&](auto xtag) {
      using SX = decltype(xtag);
      Tensor& z = ctx.allocate_output(0, x.dtype(), s.out);
      if constexpr (std::is_floating_point_v<compute_t<SX>>) {
        if (y.numel() == 1 && s.out == x.dims() && scalar_fast_path<SX>(x, y, z)) return;
      }
      dispatch<kTNumeric>(y.dtype(), n, "exponent", [&](auto ytag) {
        using SY = decltype(ytag);
        ErrorFlag flag;
        PowOp op;
        op.err = &flag;
        binary_broadcast(x.data<SX>(), s.a, y.data<SY>(), s.b, z.data<SX>(), s.out, op, grain_for(20));
        check_flag(op, flag, n);
      });
    });
  }

 private:
  template <class SX>
  static bool scalar_fast_path(const Tensor& x, const Tensor& y, Tensor& z) {
    double e = y.get_double(0);
    auto map = [&](auto op) { unary_map(x.data<SX>(), z.data<SX>(), x.numel(), op, grain_for(2)); };
    if (e == 0)
      map(PowScalarOp<PowKind::Zero>{});
    else if (e == 1)
      map(PowScalarOp<PowKind::One>{});
    else if (e == 2)
      map(PowScalarOp<PowKind::Two>{});
    else if (e == 3)
      map(PowScalarOp<PowKind::Three>{});
    else if (e == -1)
      map(PowScalarOp<PowKind::MinusOne>{});
    else if (e == 0.5)
      map(PowScalarOp<PowKind::Half>{});
    else
      return false;
    return true;
  }
};

// ---- PRelu --------------------------------------------------------------------------------------

// y = x < 0 ? slope * x : x, slope broadcast to x's shape (unidirectionally). Before opset 7 a 1-D slope of
// x's channel count applies per channel (dimension 1), as the PyTorch exporter of that time wrote it.
struct PReluOp {
  template <class C>
  C operator()(C x, C slope) const {
    if constexpr (std::is_unsigned_v<C>)
      return x;
    else
      return mul_wrap(x, x < C(0) ? slope : C(1));  // select, then multiply: vectorises
  }
};

class PReluKernel final : public Kernel {
 public:
  explicit PReluKernel(const Node&) {}
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor& x = ctx.in(0);
    const Tensor& slope = ctx.in(1);
    GAF_CHECK(x.dtype() == slope.dtype(), "{}: X is {} but slope is {}", n.describe(), dtype_name(x.dtype()),
              dtype_name(slope.dtype()));
    std::vector<int64_t> sd = slope.dims();
    if (n.opset < 7 && slope.rank() == 1 && x.rank() >= 2 && slope.numel() == x.dim(1) &&
        slope.numel() != 1) {
      sd.assign(x.rank() - 1, 1);
      sd[0] = slope.numel();
    }
    bool fits = int(sd.size()) <= x.rank();
    for (size_t i = 0; fits && i < sd.size(); ++i) {
      int64_t xd = x.dim(int(x.rank() - sd.size() + i));
      fits = sd[i] == xd || sd[i] == 1;
    }
    GAF_CHECK(fits, "{}: slope of shape {} does not broadcast to X of shape {}", n.describe(),
              dims_to_string(slope.dims()), dims_to_string(x.dims()));
    dispatch<kTFloating | kTSigned | kTUnsigned>(x.dtype(), n, "input", [&](auto tag) {
      using S = decltype(tag);
      Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
      binary_broadcast(x.data<S>(), x.dims(), slope.data<S>(), sd, y.data<S>(), x.dims(), PReluOp{},
                       grain_for(2));
    });
  }
};

}  // namespace

void register_binary_ops(KernelRegistry& r) {
  add_binary<AddOp>(r, "Add");
  add_binary<SubOp>(r, "Sub");
  add_binary<MulOp>(r, "Mul");
  add_binary<DivOp>(r, "Div");
  add_binary<ModOp>(r, "Mod");
  add_binary<EqualOp>(r, "Equal");
  add_binary<LessOp>(r, "Less");
  add_binary<LessOrEqualOp>(r, "LessOrEqual");
  add_binary<GreaterOp>(r, "Greater");
  add_binary<GreaterOrEqualOp>(r, "GreaterOrEqual");
  add_binary<AndOp>(r, "And");
  add_binary<OrOp>(r, "Or");
  add_binary<XorOp>(r, "Xor");
  add_binary<BitShiftOp>(r, "BitShift");
  r.add("Pow").set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<PowKernel>(n); });
  r.add("PRelu").set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<PReluKernel>(n); });
  ew::register_variadic_ops(r);
  ew::register_where_op(r);
  ew::register_cast_ops(r);
}

}  // namespace gaf::runtime
