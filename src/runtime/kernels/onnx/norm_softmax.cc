// Softmax, LogSoftmax, Hardmax.
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1) and the op works on rows of
// prod(dims[axis:]); from opset 13 it works along the single axis `axis` (default -1). Both views are
// [outer, n, inner]; inner == 1 is the row path, otherwise columns are processed in chunks, vectorised across
// the inner dimension.
//
// Everything is numerically stable (the maximum is subtracted); statistics and output take one pass each,
// the second on data still in cache for rows that fit:
//  * Softmax rows up to kInCacheRow: the max, then y = exp(x - max) with the sum in the same pass, then
//    y *= 1/sum while the row is still in cache: one exp per element.
//  * Longer rows and LogSoftmax: an online pass keeps a running (max, sum) per block of kBlock elements
//    (rescaling the sum when the maximum grows), then one output pass.
//  * Columns: an online pass per element (max and rescaled sum, one exp), then the output pass.
#include "runtime/kernels/onnx/norm_ops.h"
#include "runtime/kernels/onnx/reduce_arg.h"

namespace gaf::runtime::rn {

namespace {

enum class SmKind { Softmax, LogSoftmax, Hardmax };

constexpr int64_t kBlock = 1024;        // elements per block of the online pass; a multiple of the lanes
constexpr int64_t kInCacheRow = 16384;  // 64 KiB of fp32
constexpr int64_t kColChunk = 1024;     // columns per piece in the column path

// Maximum of x[0..n) ignoring NaN (-inf when there is no number; NaN then shows up in the sums).
template <class C>
C row_max(const C* x, int64_t n) {
  constexpr int64_t W = 32;
  C lanes[W];
  for (int64_t j = 0; j < W; ++j) lanes[j] = -std::numeric_limits<C>::infinity();
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const C* xi = x + i;
    for (int64_t j = 0; j < W; ++j) lanes[j] = xi[j] > lanes[j] ? xi[j] : lanes[j];
  }
  for (; i < n; ++i) lanes[0] = x[i] > lanes[0] ? x[i] : lanes[0];
  C m = lanes[0];
  for (int64_t j = 1; j < W; ++j) m = lanes[j] > m ? lanes[j] : m;
  return m;
}

// sum(exp(x - m)) over n <= kBlock values, accumulated in C lanes then returned as double.
template <class C>
double block_sum_exp(const C* x, int64_t n, C m) {
  C s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += exp_shifted(x[i], m);
  return double(s);
}

// y = exp(x - m), returning sum(y); n <= kBlock.
template <class C>
double block_exp_store(const C* x, C* y, int64_t n, C m) {
  C s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    C e = exp_shifted(x[i], m);
    y[i] = e;
    s += e;
  }
  return double(s);
}

// Online pass: maximum m and sum(exp(x - m)) of a row.
template <class C>
void online_max_sum(const C* x, int64_t n, C& m_out, double& s_out) {
  C m = -std::numeric_limits<C>::infinity();
  double s = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t cnt = std::min(kBlock, n - b);
    const C* xb = x + b;
    C bm = row_max(xb, cnt);
    if (bm == -std::numeric_limits<C>::infinity()) {
      // Only -inf (contributes 0) or NaN here; NaN must still poison the sum.
      for (int64_t i = 0; i < cnt; ++i)
        if (xb[i] != xb[i]) s = xb[i];
      continue;
    }
    if (bm > m) {
      s *= std::exp(double(m) - double(bm));
      m = bm;
    }
    s += block_sum_exp(xb, cnt, m);
  }
  m_out = m;
  s_out = s;
}

template <class C>
void softmax_row(const C* x, C* y, int64_t n) {
  if (n <= kInCacheRow) {
    const C m = row_max(x, n);
    double s = 0;
    for (int64_t b = 0; b < n; b += kBlock) s += block_exp_store(x + b, y + b, std::min(kBlock, n - b), m);
    const C inv = C(1.0 / s);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
    return;
  }
  C m;
  double s;
  online_max_sum(x, n, m, s);
  const C inv = C(1.0 / s);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_shifted(x[i], m) * inv;
}

template <class C>
void log_softmax_row(const C* x, C* y, int64_t n) {
  C m;
  double s;
  online_max_sum(x, n, m, s);
  const C ls = C(std::log(s));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
}

template <class C>
void hardmax_row(const C* x, C* y, int64_t n) {
  const int64_t k = arg_row<true, false>(x, n);
  for (int64_t i = 0; i < n; ++i) y[i] = C(0);
  y[k] = C(1);
}

template <SmKind Kind, class C>
void row_op(const C* x, C* y, int64_t n) {
  if constexpr (Kind == SmKind::Softmax)
    softmax_row(x, y, n);
  else if constexpr (Kind == SmKind::LogSoftmax)
    log_softmax_row(x, y, n);
  else
    hardmax_row(x, y, n);
}

template <SmKind Kind, class T>
void run_rows(const T* x, T* y, int64_t rows, int64_t n) {
  using C = compute_t<T>;
  parallel_for(rows, std::max<int64_t>(1, kGrain / n), [&](int64_t b, int64_t e) {
    if constexpr (is_f16_v<T>) {
      std::vector<float> xb(static_cast<size_t>(n)), yb(static_cast<size_t>(n));
      for (int64_t r = b; r < e; ++r) {
        to_float(x + r * n, xb.data(), n);
        row_op<Kind>(xb.data(), yb.data(), n);
        from_float(yb.data(), y + r * n, n);
      }
    } else {
      for (int64_t r = b; r < e; ++r) row_op<Kind, C>(x + r * n, y + r * n, n);
    }
  });
}

// Writes cnt computed values to y (converting 16-bit floats).
template <class T>
inline void store_out(const compute_t<T>* v, T* y, int64_t cnt) {
  if constexpr (is_f16_v<T>)
    from_float(v, y, cnt);
  else
    std::copy(v, v + cnt, y);
}

// One online step for columns: folds x into the running maximum m and sum s = sum(exp(values - m)). When x
// exceeds m the sum is rescaled by exp(m - x), otherwise exp(x - m) is added: either way one exp of -|x - m|.
// x == m (including two equal infinities) adds exactly 1; NaN poisons s.
template <class C>
inline void online_col_step(const C* q, int64_t cnt, C* m, double* s) {
  for (int64_t j = 0; j < cnt; ++j) {
    const C x = q[j], mj = m[j];
    // Written as selects of unconditionally computed values so the loop vectorises.
    C nd = -std::abs(x - mj);
    nd = x == mj ? C(0) : nd;
    const C ev = exp_shifted(nd, C(0));
    s[j] = x > mj ? s[j] * double(ev) + 1.0 : s[j] + double(ev);
    m[j] = x > mj ? x : mj;
  }
}

// Column path: [outer, n, inner] with inner > 1, pieces of up to kColChunk columns. Rows of a piece are read
// contiguously: an online pass for (max, sum), then the output pass.
template <SmKind Kind, class T>
void run_cols(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using C = compute_t<T>;
  const int64_t chunk = std::min(inner, kColChunk);
  const int64_t per = (inner + chunk - 1) / chunk;
  parallel_for(outer * per, std::max<int64_t>(1, kGrain / (n * chunk)), [&](int64_t b, int64_t e) {
    C m[kColChunk], buf[kColChunk], out[kColChunk], fin[kColChunk];
    double s[kColChunk];
    int64_t idx[kColChunk];
    for (int64_t p = b; p < e; ++p) {
      const int64_t o = p / per, j0 = (p % per) * chunk, cnt = std::min(chunk, inner - j0);
      const T* xo = x + o * n * inner + j0;
      T* yo = y + o * n * inner + j0;
      auto row = [&](int64_t i) { return as_compute(xo + i * inner, cnt, buf); };
      const C* q0 = row(0);
      if constexpr (Kind == SmKind::Hardmax) {
        for (int64_t j = 0; j < cnt; ++j) {
          m[j] = q0[j];
          idx[j] = 0;
        }
        for (int64_t i = 1; i < n; ++i) arg_cols_step<true, false>(row(i), cnt, i, m, idx);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < cnt; ++j) out[j] = idx[j] == i ? C(1) : C(0);
          store_out(out, yo + i * inner, cnt);
        }
        continue;
      }
      for (int64_t j = 0; j < cnt; ++j) {
        m[j] = q0[j];
        s[j] = 1.0;
      }
      for (int64_t i = 1; i < n; ++i) online_col_step(row(i), cnt, m, s);
      if constexpr (Kind == SmKind::Softmax) {
        for (int64_t j = 0; j < cnt; ++j) fin[j] = C(1.0 / s[j]);
        for (int64_t i = 0; i < n; ++i) {
          const C* q = row(i);
          for (int64_t j = 0; j < cnt; ++j) out[j] = exp_shifted(q[j], m[j]) * fin[j];
          store_out(out, yo + i * inner, cnt);
        }
      } else {
        for (int64_t j = 0; j < cnt; ++j) fin[j] = C(std::log(s[j]));
        for (int64_t i = 0; i < n; ++i) {
          const C* q = row(i);
          for (int64_t j = 0; j < cnt; ++j) out[j] = (q[j] - m[j]) - fin[j];
          store_out(out, yo + i * inner, cnt);
        }
      }
    }
  });
}

class SoftmaxKernel final : public Kernel {
 public:
  SoftmaxKernel(const Node& n, SmKind kind)
      : kind_(kind), coerce_2d_(n.opset < 13), axis_(n.attr_int("axis", n.opset < 13 ? 1 : -1)) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const Tensor& x = ctx.in(0);
    check_float_input(x, node, "the input");
    const int r = x.rank();
    GAF_CHECK(r >= 1, "{}: the input must have rank >= 1, got a scalar", node.describe());
    GAF_CHECK(axis_ >= -r && axis_ < r, "{}: axis {} is out of range for an input of rank {}",
              node.describe(), axis_, r);
    const int axis = int(axis_ < 0 ? axis_ + r : axis_);
    const int64_t outer = dims_product(x.dims(), 0, axis);
    const int64_t n = coerce_2d_ ? dims_product(x.dims(), axis, r) : x.dim(axis);
    const int64_t inner = coerce_2d_ ? 1 : dims_product(x.dims(), axis + 1, r);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.dims());
    if (x.numel() == 0) return;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        switch (kind_) {
          case SmKind::Softmax:
            return dispatch<SmKind::Softmax>(x.data<T>(), y.data<T>(), outer, n, inner);
          case SmKind::LogSoftmax:
            return dispatch<SmKind::LogSoftmax>(x.data<T>(), y.data<T>(), outer, n, inner);
          case SmKind::Hardmax:
            return dispatch<SmKind::Hardmax>(x.data<T>(), y.data<T>(), outer, n, inner);
        }
      }
    });
  }

 private:
  template <SmKind Kind, class T>
  static void dispatch(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
    if (inner == 1)
      run_rows<Kind>(x, y, outer, n);
    else
      run_cols<Kind>(x, y, outer, n, inner);
  }

  SmKind kind_;
  bool coerce_2d_;
  int64_t axis_;
};

}  // namespace

void register_softmax_ops(KernelRegistry& r) {
  const std::pair<const char*, SmKind> ops[] = {
      {"Softmax", SmKind::Softmax}, {"LogSoftmax", SmKind::LogSoftmax}, {"Hardmax", SmKind::Hardmax}};
  for (const auto& op : ops) {
    const char* name = op.first;
    const SmKind kind = op.second;  // a plain variable: clang 14 cannot capture a structured binding
    r.add(name).set_kernel([kind](const Node& n) -> std::unique_ptr<Kernel> {
      return std::make_unique<SoftmaxKernel>(n, kind);
    });
  }
}

}  // namespace gaf::runtime::rn
