// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// Both take scores of shape (N, C, d1, ..., dk) (C classes along axis 1) and integer targets of shape
// (N, d1, ..., dk). With D = d1 * ... * dk, the loss at position (n, d) is
//     loss[n, d] = -w[t] * logp[n, t, d],   t = target[n, d],   w = weight or 1,
// and 0 (with weight 0) where t equals ignore_index. NLL reads logp from its input; SoftmaxCrossEntropyLoss
// computes logp = log_softmax(scores, axis 1) first and can return it as a second output. Reductions:
// "none" returns the loss per position, "sum" its sum, "mean" sum(loss) / sum(w over non-ignored positions)
// (0/0 = NaN when every position is ignored, as in the ONNX reference and PyTorch).
#include <algorithm>
#include <limits>

#include "runtime/kernels/onnx/extra_util.h"

namespace gaf::runtime::extra {

namespace {

enum class Reduction { None, Sum, Mean };

struct LossSpec {
  Reduction reduction = Reduction::Mean;
  bool has_ignore = false;
  int64_t ignore_index = 0;
  int64_t N = 0, C = 0, D = 1;
};

LossSpec parse_spec(const Node& node, const Tensor& scores, const Tensor& target, const Tensor* weight,
                    const char* scores_name, const char* target_name) {
  LossSpec s;
  const std::string red = node.attr_string("reduction", "mean");
  if (red == "none")
    s.reduction = Reduction::None;
  else if (red == "sum")
    s.reduction = Reduction::Sum;
  else if (red == "mean")
    s.reduction = Reduction::Mean;
  else
    fail("{}: reduction '{}' is not valid (none, sum or mean)", node.describe(), red);
  s.has_ignore = node.has_attr("ignore_index");
  if (s.has_ignore) s.ignore_index = node.attr_int("ignore_index");

  GAF_CHECK(scores.rank() >= 2, "{}: {} must have shape (N, C, d1, ..., dk), got {}", node.describe(),
            scores_name, dims_to_string(scores.dims()));
  s.N = scores.dim(0);
  s.C = scores.dim(1);
  for (int i = 2; i < scores.rank(); ++i) s.D *= scores.dim(i);
  std::vector<int64_t> want(scores.dims());
  want.erase(want.begin() + 1);
  GAF_CHECK(target.dims() == want, "{}: {} must have shape {} for {} of shape {}, got {}", node.describe(),
            target_name, dims_to_string(want), scores_name, dims_to_string(scores.dims()),
            dims_to_string(target.dims()));
  GAF_CHECK(target.dtype() == DType::Int64 || target.dtype() == DType::Int32,
            "{}: {} must be int32 or int64, got {}", node.describe(), target_name,
            dtype_name(target.dtype()));
  if (weight) {
    GAF_CHECK(weight->rank() == 1 && weight->dim(0) == s.C,
              "{}: the weights must have shape [{}] (one per class), got {}", node.describe(), s.C,
              dims_to_string(weight->dims()));
    GAF_CHECK(weight->dtype() == scores.dtype(), "{}: the weights are {} but {} is {}", node.describe(),
              dtype_name(weight->dtype()), scores_name, dtype_name(scores.dtype()));
  }
  return s;
}

// Every target is a class index in [0, C) or ignore_index; checked before any parallel work.
template <class I>
void check_targets(const Node& node, const I* t, int64_t count, const LossSpec& s, const char* target_name) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = int64_t(t[i]);
    if (s.has_ignore && v == s.ignore_index) continue;
    if (v < 0 || v >= s.C)
      fail("{}: {} value {} at position {} is not a class index in [0, {}){}", node.describe(), target_name,
           v, i, s.C, s.has_ignore ? fmt::format(" nor ignore_index {}", s.ignore_index) : std::string());
  }
}

// log(sum(exp(x[n, :, d]))) for every position, optionally writing log_softmax into `logp`.
template <class T>
void log_sum_exp(const T* x, const LossSpec& s, acc_t<T>* lse, T* logp) {
  using A = acc_t<T>;
  const int64_t C = s.C, D = s.D;
  if (D == 1) {
    // (N, C): one contiguous row per position. Lane-wise max, then one vectorised pass of exp.
    parallel_for(s.N, std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
      std::vector<A> buf;
      for (int64_t n = b; n < e; ++n) {
        const T* xr = x + n * C;
        const A* row;
        if constexpr (std::is_same_v<T, A>) {
          row = xr;
        } else {
          buf.resize(size_t(C));
          for (int64_t c = 0; c < C; ++c) buf[size_t(c)] = to_arith(xr[c]);
          row = buf.data();
        }
        constexpr int64_t kLanes = 16;
        A lanes[kLanes];
        for (int64_t j = 0; j < kLanes; ++j) lanes[j] = -std::numeric_limits<A>::infinity();
        int64_t c = 0;
        for (; c + kLanes <= C; c += kLanes)
          for (int64_t j = 0; j < kLanes; ++j) lanes[j] = row[c + j] > lanes[j] ? row[c + j] : lanes[j];
        for (; c < C; ++c) lanes[0] = row[c] > lanes[0] ? row[c] : lanes[0];
        A m = lanes[0];
        for (int64_t j = 1; j < kLanes; ++j) m = lanes[j] > m ? lanes[j] : m;
        A sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t k = 0; k < C; ++k) sum += exp_a(row[k] - m);
        const A l = m + std::log(sum);
        lse[n] = l;
        if (logp) {
          T* pr = logp + n * C;
          for (int64_t k = 0; k < C; ++k) pr[k] = from_arith<T>(row[k] - l);
        }
      }
    });
    return;
  }
  // (N, C, D): blocks of consecutive positions, so the loops over them run over contiguous memory.
  constexpr int64_t kBlock = 256;
  const int64_t nblk = (D + kBlock - 1) / kBlock;
  const int64_t per_unit = C * std::min(D, kBlock);
  parallel_for(s.N * nblk, std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(per_unit, 1)),
               [&](int64_t ub, int64_t ue) {
                 A mx[kBlock], sum[kBlock];
                 for (int64_t u = ub; u < ue; ++u) {
                   const int64_t n = u / nblk, d0 = (u % nblk) * kBlock;
                   const int64_t len = std::min(kBlock, D - d0);
                   const T* xn = x + n * C * D + d0;
                   for (int64_t j = 0; j < len; ++j) {
                     mx[j] = -std::numeric_limits<A>::infinity();
                     sum[j] = 0;
                   }
                   for (int64_t c = 0; c < C; ++c) {
                     const T* xc = xn + c * D;
                     for (int64_t j = 0; j < len; ++j) {
                       const A v = to_arith(xc[j]);
                       mx[j] = v > mx[j] ? v : mx[j];
                     }
                   }
                   for (int64_t c = 0; c < C; ++c) {
                     const T* xc = xn + c * D;
                     for (int64_t j = 0; j < len; ++j) sum[j] += exp_a(to_arith(xc[j]) - mx[j]);
                   }
                   A* l = lse + n * D + d0;
                   for (int64_t j = 0; j < len; ++j) l[j] = mx[j] + std::log(sum[j]);
                   if (logp) {
                     for (int64_t c = 0; c < C; ++c) {
                       const T* xc = xn + c * D;
                       T* pc = logp + n * C * D + c * D + d0;
                       for (int64_t j = 0; j < len; ++j) pc[j] = from_arith<T>(to_arith(xc[j]) - l[j]);
                     }
                   }
                 }
               });
}

// The loss from log-probabilities logp[n, t, d] = x[n, t, d] - (lse ? lse[n, d] : 0).
template <class T, class I>
void weighted_nll(KernelContext& ctx, const LossSpec& s, const Tensor& x, const Tensor& target,
                  const Tensor* weight, const acc_t<T>* lse) {
  using A = acc_t<T>;
  const T* xp = x.data<T>();
  const I* tp = target.data<I>();
  const T* wp = weight ? weight->data<T>() : nullptr;
  const int64_t C = s.C, D = s.D, P = s.N * s.D;
  auto loss_at = [&](int64_t p, A& w) -> A {
    const int64_t t = int64_t(tp[p]);
    if (s.has_ignore && t == s.ignore_index) {
      w = 0;
      return 0;
    }
    const int64_t n = p / D, d = p % D;
    A v = to_arith(xp[(n * C + t) * D + d]);
    if (lse) v -= lse[p];
    w = wp ? to_arith(wp[t]) : A(1);
    return -w * v;
  };
  if (s.reduction == Reduction::None) {
    T* out = ctx.allocate_output(0, x.dtype(), target.dims()).template data<T>();
    parallel_for(P, kWorkGrain, [&](int64_t b, int64_t e) {
      A w;
      for (int64_t p = b; p < e; ++p) out[p] = from_arith<T>(loss_at(p, w));
    });
    return;
  }
  // Per-position values first, then one ordered sum in double: deterministic for any thread count.
  std::vector<A> lv(static_cast<size_t>(P)), wv(static_cast<size_t>(P));
  parallel_for(P, kWorkGrain, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) lv[size_t(p)] = loss_at(p, wv[size_t(p)]);
  });
  double total = 0, wsum = 0;
  for (int64_t p = 0; p < P; ++p) {
    total += double(lv[size_t(p)]);
    wsum += double(wv[size_t(p)]);
  }
  const double r = s.reduction == Reduction::Sum ? total : total / wsum;
  T* out = ctx.allocate_output(0, x.dtype(), {}).template data<T>();
  out[0] = from_arith<T>(A(r));
}

template <class F>
decltype(auto) visit_target(DType t, F&& f) {
  if (t == DType::Int32) return f(int32_t{});
  return f(int64_t{});
}

void nll_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const Tensor& target = ctx.in(1);
  const Tensor* weight = ctx.input(2);
  const LossSpec s = parse_spec(node, x, target, weight, "input", "target");
  visit_float(x.dtype(), node, "input", [&](auto xt) {
    using T = decltype(xt);
    visit_target(target.dtype(), [&](auto it) {
      using I = decltype(it);
      check_targets(node, target.data<I>(), target.numel(), s, "target");
      weighted_nll<T, I>(ctx, s, x, target, weight, nullptr);
    });
  });
}

void sce_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const Tensor& labels = ctx.in(1);
  const Tensor* weight = ctx.input(2);
  const LossSpec s = parse_spec(node, x, labels, weight, "scores", "labels");
  visit_float(x.dtype(), node, "scores", [&](auto xt) {
    using T = decltype(xt);
    visit_target(labels.dtype(), [&](auto it) {
      using I = decltype(it);
      check_targets(node, labels.data<I>(), labels.numel(), s, "labels");
      std::vector<acc_t<T>> lse(static_cast<size_t>(s.N * s.D));
      T* logp =
          output_wanted(ctx, 1) ? ctx.allocate_output(1, x.dtype(), x.dims()).template data<T>() : nullptr;
      log_sum_exp<T>(x.data<T>(), s, lse.data(), logp);
      weighted_nll<T, I>(ctx, s, x, labels, weight, lse.data());
    });
  });
}

}  // namespace

void register_extra_loss_ops(KernelRegistry& r) {
  r.add("NegativeLogLikelihoodLoss").set_kernel(fn_kernel(nll_kernel));
  r.add("SoftmaxCrossEntropyLoss").set_kernel(fn_kernel(sce_kernel));
}

}  // namespace gaf::runtime::extra
