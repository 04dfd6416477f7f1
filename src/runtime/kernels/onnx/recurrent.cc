// Recurrent layers: RNN, GRU and LSTM (ONNX semantics, all directions, layouts 0 and 1).
//
// One kernel serves the three cells. Per direction it first computes the input projection of every time step
// at once, XW = X * W^T + bias (a blocked GEMM over all seq * batch rows), then walks the sequence: each step
// multiplies the hidden state by R^T (the same GEMM with batch rows) and applies the cell's gate equations
// elementwise. Weights are transposed once to [K, gates * hidden] so the GEMM's inner loop runs over
// contiguous output columns (vectorised without reassociating sums); when W, R, B and P are constants this is
// done when the session is compiled. 16-bit inputs compute in fp32. sequence_lens limits each batch entry to
// its own length: its state stops there, and Y is zero past it.
#include <algorithm>
#include <cctype>
#include <optional>

#include "runtime/kernels/onnx/extra_util.h"

namespace gaf::runtime::extra {

namespace {

enum class Cell { RNN, GRU, LSTM };

struct Activation {
  enum Kind {
    Relu,
    Tanh,
    Sigmoid,
    Affine,
    LeakyRelu,
    ThresholdedRelu,
    ScaledTanh,
    HardSigmoid,
    Elu,
    Softsign,
    Softplus
  };
  Kind kind = Tanh;
  float alpha = 0, beta = 0;
};

// Parses the activation names, consuming activation_alpha / activation_beta in order by the functions that
// take them (the others use the defaults of the corresponding ONNX operators).
std::vector<Activation> parse_activations(const Node& node, const std::vector<std::string>& names) {
  const std::vector<float> alphas = node.attr_floats("activation_alpha");
  const std::vector<float> betas = node.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  auto next_alpha = [&](float def) { return ai < alphas.size() ? alphas[ai++] : def; };
  auto next_beta = [&](float def) { return bi < betas.size() ? betas[bi++] : def; };
  std::vector<Activation> out;
  for (const std::string& name : names) {
    std::string n = name;
    for (char& ch : n) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    Activation a;
    if (n == "relu") {
      a.kind = Activation::Relu;
    } else if (n == "tanh") {
      a.kind = Activation::Tanh;
    } else if (n == "sigmoid") {
      a.kind = Activation::Sigmoid;
    } else if (n == "affine") {
      a.kind = Activation::Affine;
      a.alpha = next_alpha(1.f);
      a.beta = next_beta(0.f);
    } else if (n == "leakyrelu") {
      a.kind = Activation::LeakyRelu;
      a.alpha = next_alpha(0.01f);
    } else if (n == "thresholdedrelu") {
      a.kind = Activation::ThresholdedRelu;
      a.alpha = next_alpha(1.f);
    } else if (n == "scaledtanh") {
      a.kind = Activation::ScaledTanh;
      a.alpha = next_alpha(1.f);
      a.beta = next_beta(1.f);
    } else if (n == "hardsigmoid") {
      a.kind = Activation::HardSigmoid;
      a.alpha = next_alpha(0.2f);
      a.beta = next_beta(0.5f);
    } else if (n == "elu") {
      a.kind = Activation::Elu;
      a.alpha = next_alpha(1.f);
    } else if (n == "softsign") {
      a.kind = Activation::Softsign;
    } else if (n == "softplus") {
      a.kind = Activation::Softplus;
    } else {
      unsupported("{}: activation function '{}' is not supported", node.describe(), name);
    }
    out.push_back(a);
  }
  return out;
}

// Applies f in place to v[0, n).
template <class A>
void activate(const Activation& f, A* v, int64_t n) {
  const A alpha = A(f.alpha), beta = A(f.beta);
  switch (f.kind) {
    case Activation::Relu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0 ? v[i] : A(0);
      break;
    case Activation::Tanh:
      for (int64_t i = 0; i < n; ++i) v[i] = tanh_a(v[i]);
      break;
    case Activation::Sigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = sigmoid_a(v[i]);
      break;
    case Activation::Affine:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * v[i] + beta;
      break;
    case Activation::LeakyRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= 0 ? v[i] : alpha * v[i];
      break;
    case Activation::ThresholdedRelu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > alpha ? v[i] : A(0);
      break;
    case Activation::ScaledTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = alpha * tanh_a(beta * v[i]);
      break;
    case Activation::HardSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(alpha * v[i] + beta, A(0), A(1));
      break;
    case Activation::Elu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= 0 ? v[i] : alpha * expm1_a(v[i]);
      break;
    case Activation::Softsign:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (A(1) + std::abs(v[i]));
      break;
    case Activation::Softplus:
      for (int64_t i = 0; i < n; ++i) v[i] = std::max(v[i], A(0)) + log1p_a(exp_a(-std::abs(v[i])));
      break;
  }
}

// C[0:MR, 0:NR] += A[0:MR, 0:K] * Bt[0:K, 0:NR] with the MR x NR accumulators in registers.
template <class A, int MR, int NR>
inline void gemm_tile(int64_t K, const A* a, int64_t lda, const A* bt, int64_t ldb, A* c, int64_t ldc) {
  A acc[MR][NR] = {};
  for (int64_t k = 0; k < K; ++k) {
    const A* b = bt + k * ldb;
    for (int i = 0; i < MR; ++i) {
      const A av = a[i * lda + k];
      for (int j = 0; j < NR; ++j) acc[i][j] += av * b[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) c[i * ldc + j] += acc[i][j];
}

// The same for a partial tile (mlen <= MR rows, nlen <= NR columns), accumulating in C.
template <class A>
void gemm_edge(int64_t mlen, int64_t nlen, int64_t K, const A* a, int64_t lda, const A* bt, int64_t ldb, A* c,
               int64_t ldc) {
  for (int64_t k = 0; k < K; ++k) {
    const A* __restrict b = bt + k * ldb;
    for (int64_t i = 0; i < mlen; ++i) {
      const A av = a[i * lda + k];
      A* __restrict cr = c + i * ldc;
      for (int64_t j = 0; j < nlen; ++j) cr[j] += av * b[j];
    }
  }
}

// C[m, n] += sum_k A[m, k] * Bt[k, n] for m < M, n < N (leading dimensions lda, ldb, ldc). Work units are
// blocks of up to 64 rows by one panel of kNR columns; inside, register tiles of kMR x kNR (64 floats or
// 32 doubles: four AVX-512 vectors per row) sweep K while the Bt panel stays in cache.
template <class A>
void gemm_acc(int64_t M, int64_t N, int64_t K, const A* a, int64_t lda, const A* bt, int64_t ldb, A* c,
              int64_t ldc) {
  constexpr int kMR = 4, kNR = 64 / int(sizeof(A) / sizeof(float));
  constexpr int64_t kMB = 64;
  if (M <= 0 || N <= 0 || K <= 0) return;
  const int64_t mblocks = (M + kMB - 1) / kMB, npanels = (N + kNR - 1) / kNR;
  const int64_t unit_work = K * std::min(M, kMB) * std::min<int64_t>(N, kNR);
  parallel_for(mblocks * npanels, std::max<int64_t>(1, 4 * kWorkGrain / unit_work),
               [&](int64_t ub, int64_t ue) {
                 for (int64_t u = ub; u < ue; ++u) {
                   const int64_t m0 = (u % mblocks) * kMB, n0 = (u / mblocks) * kNR;
                   const int64_t m1 = std::min(M, m0 + kMB), nlen = std::min<int64_t>(kNR, N - n0);
                   int64_t m = m0;
                   if (nlen == kNR)
                     for (; m + kMR <= m1; m += kMR)
                       gemm_tile<A, kMR, kNR>(K, a + m * lda, lda, bt + n0, ldb, c + m * ldc + n0, ldc);
                   if (m < m1)
                     gemm_edge<A>(m1 - m, nlen, K, a + m * lda, lda, bt + n0, ldb, c + m * ldc + n0, ldc);
                 }
               });
}

// Weights of one direction in compute type, ready for the GEMMs.
template <class A>
struct DirWeights {
  std::vector<A> wt;       // [input, gates * hidden]: W transposed
  std::vector<A> rt;       // [hidden, gates * hidden]: R transposed
  std::vector<A> xbias;    // [gates * hidden]: added to X * W^T (Wb + Rb, except Rb of GRU's h gate when
                           // linear_before_reset, which is rbias_h)
  std::vector<A> rbias_h;  // [hidden]: GRU linear_before_reset only
  std::vector<A> peep;     // [3 * hidden]: LSTM peepholes (i, o, f); empty without P
};

class RecurrentKernel final : public Kernel {
 public:
  RecurrentKernel(const Node& node, Cell cell) : cell_(cell) {
    const std::string d = node.describe();
    gates_ = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 3 : 4;
    const int acts_per_dir = cell == Cell::RNN ? 1 : cell == Cell::GRU ? 2 : 3;
    hidden_ = node.has_attr("hidden_size") ? node.attr_int("hidden_size") : -1;
    GAF_CHECK(hidden_ == -1 || hidden_ > 0, "{}: hidden_size must be positive, got {}", d, hidden_);
    const std::string dir = node.attr_string("direction", "forward");
    if (dir == "forward" || dir == "reverse") {
      num_dir_ = 1;
      reverse_ = dir == "reverse";
    } else if (dir == "bidirectional") {
      num_dir_ = 2;
    } else {
      fail("{}: direction '{}' is not valid (forward, reverse or bidirectional)", d, dir);
    }
    layout_ = int(node.attr_int("layout", 0));
    GAF_CHECK(layout_ == 0 || layout_ == 1, "{}: layout must be 0 or 1, got {}", d, layout_);
    if (node.has_attr("clip")) {
      clip_ = node.attr_float("clip", 0.f);
      GAF_CHECK(clip_ > 0, "{}: clip must be positive, got {}", d, clip_);
    }
    input_forget_ = cell == Cell::LSTM && node.attr_int("input_forget", 0) != 0;
    lbr_ = cell == Cell::GRU && node.attr_int("linear_before_reset", 0) != 0;

    std::vector<std::string> names;
    auto it = node.attrs.find("activations");
    if (it != node.attrs.end()) {
      const auto* v = std::get_if<std::vector<std::string>>(&it->second);
      GAF_CHECK(v, "{}: attribute 'activations' must be a list of strings", d);
      names = *v;
      // One set given for a bidirectional layer: both directions use it.
      if (num_dir_ == 2 && int(names.size()) == acts_per_dir) names.insert(names.end(), v->begin(), v->end());
      GAF_CHECK(int(names.size()) == acts_per_dir * num_dir_,
                "{}: activations has {} entries, expected {} ({} per direction)", d, v->size(),
                acts_per_dir * num_dir_, acts_per_dir);
    } else {
      std::vector<std::string> def = cell == Cell::RNN ? std::vector<std::string>{"Tanh"}
                                     : cell == Cell::GRU
                                         ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                         : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
      for (int k = 0; k < num_dir_; ++k) names.insert(names.end(), def.begin(), def.end());
    }
    acts_ = parse_activations(node, names);
    acts_per_dir_ = acts_per_dir;

    // Constant weights: transpose once now.
    auto is_const = [&](int i) { return node.input(i) == nullptr || node.input(i)->is_constant(); };
    const bool has_w = node.input(1) && node.input(2);
    if (has_w && is_const(1) && is_const(2) && is_const(3) && (cell != Cell::LSTM || is_const(7))) {
      const Tensor& w = node.input(1)->constant();
      const Tensor& r = node.input(2)->constant();
      const Tensor* b = node.input(3) ? &node.input(3)->constant() : nullptr;
      const Tensor* p = cell == Cell::LSTM && node.input(7) ? &node.input(7)->constant() : nullptr;
      const bool floating = w.dtype() == DType::Float || w.dtype() == DType::Double ||
                            w.dtype() == DType::Float16 || w.dtype() == DType::BFloat16;
      if (floating) {
        check_weights(node, w, r, b, p, w.rank() == 3 ? w.dim(2) : -1);
        visit_float(w.dtype(), node, "W", [&](auto tag) {
          using T = decltype(tag);
          if constexpr (std::is_same_v<T, double>)
            const_d_ = prepare<T>(w, r, b, p);
          else
            const_f_ = prepare<T>(w, r, b, p);
        });
      }
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.in(0);
    visit_float(x.dtype(), ctx.node(), "X", [&](auto tag) { run_typed<decltype(tag)>(ctx); });
  }

 private:
  int64_t hidden_of(const Tensor& r) const { return hidden_ > 0 ? hidden_ : (r.rank() == 3 ? r.dim(2) : 0); }

  // Shapes of W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H], P [D, 3*H]; `input` is -1 when not known yet.
  void check_weights(const Node& node, const Tensor& w, const Tensor& r, const Tensor* b, const Tensor* p,
                     int64_t input) const {
    const std::string d = node.describe();
    const int64_t H = hidden_of(r), GH = gates_ * H, D = num_dir_;
    GAF_CHECK(H > 0, "{}: cannot tell the hidden size: R has shape {}", d, dims_to_string(r.dims()));
    GAF_CHECK(w.rank() == 3 && w.dim(0) == D && w.dim(1) == GH && (input < 0 || w.dim(2) == input),
              "{}: W must have shape [{}, {}, input_size{}], got {}", d, D, GH,
              input < 0 ? std::string() : fmt::format(" = {}", input), dims_to_string(w.dims()));
    GAF_CHECK(r.dims() == std::vector<int64_t>({D, GH, H}), "{}: R must have shape [{}, {}, {}], got {}", d,
              D, GH, H, dims_to_string(r.dims()));
    GAF_CHECK(r.dtype() == w.dtype(), "{}: R is {} but W is {}", d, dtype_name(r.dtype()),
              dtype_name(w.dtype()));
    if (b) {
      GAF_CHECK(b->dims() == std::vector<int64_t>({D, 2 * GH}), "{}: B must have shape [{}, {}], got {}", d,
                D, 2 * GH, dims_to_string(b->dims()));
      GAF_CHECK(b->dtype() == w.dtype(), "{}: B is {} but W is {}", d, dtype_name(b->dtype()),
                dtype_name(w.dtype()));
    }
    if (p) {
      GAF_CHECK(p->dims() == std::vector<int64_t>({D, 3 * H}), "{}: P must have shape [{}, {}], got {}", d, D,
                3 * H, dims_to_string(p->dims()));
      GAF_CHECK(p->dtype() == w.dtype(), "{}: P is {} but W is {}", d, dtype_name(p->dtype()),
                dtype_name(w.dtype()));
    }
  }

  template <class T>
  std::vector<DirWeights<acc_t<T>>> prepare(const Tensor& w, const Tensor& r, const Tensor* b,
                                            const Tensor* p) const {
    using A = acc_t<T>;
    const int64_t H = hidden_of(r), GH = gates_ * H, I = w.dim(2);
    const T* wp = w.data<T>();
    const T* rp = r.data<T>();
    std::vector<DirWeights<A>> out(static_cast<size_t>(num_dir_));
    for (int dir = 0; dir < num_dir_; ++dir) {
      DirWeights<A>& dw = out[size_t(dir)];
      dw.wt.resize(size_t(I * GH));
      dw.rt.resize(size_t(H * GH));
      const T* wd = wp + dir * GH * I;
      const T* rd = rp + dir * GH * H;
      for (int64_t g = 0; g < GH; ++g) {
        for (int64_t k = 0; k < I; ++k) dw.wt[size_t(k * GH + g)] = to_arith(wd[g * I + k]);
        for (int64_t k = 0; k < H; ++k) dw.rt[size_t(k * GH + g)] = to_arith(rd[g * H + k]);
      }
      dw.xbias.assign(size_t(GH), A(0));
      if (lbr_) dw.rbias_h.assign(size_t(H), A(0));
      if (b) {
        const T* bd = b->data<T>() + dir * 2 * GH;
        for (int64_t g = 0; g < GH; ++g) {
          const A wb = to_arith(bd[g]), rb = to_arith(bd[GH + g]);
          if (lbr_ && g >= 2 * H) {
            dw.xbias[size_t(g)] = wb;
            dw.rbias_h[size_t(g - 2 * H)] = rb;
          } else {
            dw.xbias[size_t(g)] = wb + rb;
          }
        }
      }
      if (p) {
        const T* pd = p->data<T>() + dir * 3 * H;
        dw.peep.resize(size_t(3 * H));
        for (int64_t k = 0; k < 3 * H; ++k) dw.peep[size_t(k)] = to_arith(pd[k]);
      }
    }
    return out;
  }

  // Whether W, R, B and P are the very constants prepared at construction (a caller may feed a graph input
  // that has an initializer, replacing it).
  bool fed_constants(const KernelContext& ctx) const {
    const Node& node = ctx.node();
    for (int i : {1, 2, 3, 7}) {
      if (i == 7 && cell_ != Cell::LSTM) continue;
      const Value* v = node.input(i);
      const Tensor* t = ctx.input(i);
      if (!v) {
        if (t) return false;
        continue;
      }
      if (!v->is_constant() || !t || t->raw() != v->constant().raw() || t->dtype() != v->constant().dtype())
        return false;
    }
    return true;
  }

  template <class A>
  void clip(A* v, int64_t n) const {
    if (clip_ <= 0) return;
    const A c = A(clip_);
    for (int64_t i = 0; i < n; ++i) v[i] = std::clamp(v[i], -c, c);
  }

  template <class T>
  void run_typed(KernelContext& ctx) {
    using A = acc_t<T>;
    const Node& node = ctx.node();
    const std::string d = node.describe();
    const Tensor& X = ctx.in(0);
    const Tensor& W = ctx.in(1);
    const Tensor& R = ctx.in(2);
    const Tensor* Bt = ctx.input(3);
    const Tensor* lens_t = ctx.input(4);
    const Tensor* h0_t = ctx.input(5);
    const Tensor* c0_t = cell_ == Cell::LSTM ? ctx.input(6) : nullptr;
    const Tensor* P = cell_ == Cell::LSTM ? ctx.input(7) : nullptr;

    GAF_CHECK(X.rank() == 3, "{}: X must have rank 3 ({}), got {}", d,
              layout_ == 0 ? "[seq_length, batch_size, input_size]" : "[batch_size, seq_length, input_size]",
              dims_to_string(X.dims()));
    const int64_t S = layout_ == 0 ? X.dim(0) : X.dim(1), B = layout_ == 0 ? X.dim(1) : X.dim(0),
                  I = X.dim(2);
    const int64_t H = hidden_of(R), G = gates_, GH = G * H, D = num_dir_;
    GAF_CHECK(W.dtype() == X.dtype(), "{}: W is {} but X is {}", d, dtype_name(W.dtype()),
              dtype_name(X.dtype()));
    check_weights(node, W, R, Bt, P, I);

    // sequence_lens: each in [0, S].
    std::vector<int64_t> lens(static_cast<size_t>(B), S);
    if (lens_t) {
      GAF_CHECK(lens_t->dtype() == DType::Int32 || lens_t->dtype() == DType::Int64,
                "{}: sequence_lens must be int32 or int64, got {}", d, dtype_name(lens_t->dtype()));
      GAF_CHECK(lens_t->dims() == std::vector<int64_t>({B}), "{}: sequence_lens must have shape [{}], got {}",
                d, B, dims_to_string(lens_t->dims()));
      for (int64_t b = 0; b < B; ++b) {
        lens[size_t(b)] = lens_t->get_int(b);
        GAF_CHECK(lens[size_t(b)] >= 0 && lens[size_t(b)] <= S,
                  "{}: sequence_lens[{}] = {} is outside [0, seq_length = {}]", d, b, lens[size_t(b)], S);
      }
    }
    const std::vector<int64_t> state_dims =
        layout_ == 0 ? std::vector<int64_t>{D, B, H} : std::vector<int64_t>{B, D, H};
    auto check_state = [&](const Tensor* t, const char* what) {
      if (!t) return;
      GAF_CHECK(t->dims() == state_dims, "{}: {} must have shape {}, got {}", d, what,
                dims_to_string(state_dims), dims_to_string(t->dims()));
      GAF_CHECK(t->dtype() == X.dtype(), "{}: {} is {} but X is {}", d, what, dtype_name(t->dtype()),
                dtype_name(X.dtype()));
    };
    check_state(h0_t, "initial_h");
    check_state(c0_t, "initial_c");

    // Weights: prepared at compile time when constant.
    std::vector<DirWeights<A>> local;
    const std::vector<DirWeights<A>>* dws;
    const bool cached = fed_constants(ctx);
    if constexpr (std::is_same_v<A, double>) {
      dws = cached && const_d_ ? &*const_d_ : nullptr;
    } else {
      dws = cached && const_f_ ? &*const_f_ : nullptr;
    }
    if (!dws) {
      local = prepare<T>(W, R, Bt, P);
      dws = &local;
    }

    // Outputs.
    T* y = nullptr;
    if (output_wanted(ctx, 0)) {
      std::vector<int64_t> yd =
          layout_ == 0 ? std::vector<int64_t>{S, D, B, H} : std::vector<int64_t>{B, S, D, H};
      y = ctx.allocate_output(0, X.dtype(), yd, /*zero=*/true).template data<T>();
    }
    T* yh =
        output_wanted(ctx, 1) ? ctx.allocate_output(1, X.dtype(), state_dims).template data<T>() : nullptr;
    T* yc = cell_ == Cell::LSTM && output_wanted(ctx, 2)
                ? ctx.allocate_output(2, X.dtype(), state_dims).template data<T>()
                : nullptr;
    // Offset of state (dir, b) in a [D, B, H] or [B, D, H] tensor.
    auto state_off = [&](int64_t dir, int64_t b) { return (layout_ == 0 ? dir * B + b : b * D + dir) * H; };

    std::vector<A> xbuf;
    const A* x = compute_view<T>(X, xbuf);
    const int64_t rows = S * B;
    std::vector<A> xw(static_cast<size_t>(rows * GH)), rec(static_cast<size_t>(B * GH)),
        h(static_cast<size_t>(B * H)), c, rh;
    if (cell_ == Cell::LSTM) c.resize(size_t(B * H));
    if (cell_ == Cell::GRU && !lbr_) rh.resize(size_t(B * H));
    const int64_t max_len = B > 0 ? *std::max_element(lens.begin(), lens.end()) : 0;
    // Gate math costs about 20 operations per gate value (exp / tanh).
    const int64_t ew_grain = std::max<int64_t>(1, 4 * kWorkGrain / std::max<int64_t>(GH * 20, 1));

    for (int64_t dir = 0; dir < D; ++dir) {
      const DirWeights<A>& dw = (*dws)[size_t(dir)];
      const bool forward = D == 2 ? dir == 0 : !reverse_;
      const Activation& f = acts_[size_t(dir * acts_per_dir_)];
      const Activation& g = acts_[size_t(dir * acts_per_dir_ + (acts_per_dir_ > 1 ? 1 : 0))];
      const Activation& hact = acts_[size_t(dir * acts_per_dir_ + (acts_per_dir_ > 2 ? 2 : 0))];

      // XW for all rows, in X's row order (t * B + b for layout 0, b * S + t for layout 1).
      parallel_for(rows, std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(GH, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t r = b; r < e; ++r)
                       std::copy(dw.xbias.begin(), dw.xbias.end(), xw.begin() + r * GH);
                   });
      gemm_acc<A>(rows, GH, I, x, I, dw.wt.data(), GH, xw.data(), GH);

      // Initial state.
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t k = 0; k < H; ++k) {
          h[size_t(b * H + k)] = h0_t ? A(to_arith(h0_t->data<T>()[state_off(dir, b) + k])) : A(0);
          if (cell_ == Cell::LSTM)
            c[size_t(b * H + k)] = c0_t ? A(to_arith(c0_t->data<T>()[state_off(dir, b) + k])) : A(0);
        }
      }

      for (int64_t step = 0; step < max_len; ++step) {
        // Row of XW and time index of batch entry b at this step; -1 when its sequence has ended.
        auto time_of = [&](int64_t b) -> int64_t {
          const int64_t len = lens[size_t(b)];
          if (step >= len) return -1;
          return forward ? step : len - 1 - step;
        };
        auto xw_row = [&](int64_t b, int64_t t) {
          return xw.data() + (layout_ == 0 ? t * B + b : b * S + t) * GH;
        };
        std::fill(rec.begin(), rec.end(), A(0));
        const int64_t first_cols = cell_ == Cell::GRU && !lbr_ ? 2 * H : GH;
        gemm_acc<A>(B, first_cols, H, h.data(), H, dw.rt.data(), GH, rec.data(), GH);

        if (cell_ == Cell::RNN) {
          parallel_for(B, ew_grain, [&](int64_t bb, int64_t be) {
            for (int64_t b = bb; b < be; ++b) {
              const int64_t t = time_of(b);
              if (t < 0) continue;
              A* gt = rec.data() + b * GH;
              const A* xr = xw_row(b, t);
              for (int64_t k = 0; k < H; ++k) gt[k] += xr[k];
              clip(gt, H);
              activate(f, gt, H);
              std::copy(gt, gt + H, h.begin() + b * H);
            }
          });
        } else if (cell_ == Cell::GRU) {
          // z and r (gates 0 and 1).
          parallel_for(B, ew_grain, [&](int64_t bb, int64_t be) {
            for (int64_t b = bb; b < be; ++b) {
              const int64_t t = time_of(b);
              if (t < 0) continue;
              A* gt = rec.data() + b * GH;
              const A* xr = xw_row(b, t);
              for (int64_t k = 0; k < 2 * H; ++k) gt[k] += xr[k];
              clip(gt, 2 * H);
              activate(f, gt, 2 * H);
              if (!lbr_) {
                const A* r = gt + H;
                const A* hb = h.data() + b * H;
                A* o = rh.data() + b * H;
                for (int64_t k = 0; k < H; ++k) o[k] = r[k] * hb[k];
              }
            }
          });
          // (r . h) * Rh^T for the h gate.
          if (!lbr_) gemm_acc<A>(B, H, H, rh.data(), H, dw.rt.data() + 2 * H, GH, rec.data() + 2 * H, GH);
          parallel_for(B, ew_grain, [&](int64_t bb, int64_t be) {
            for (int64_t b = bb; b < be; ++b) {
              const int64_t t = time_of(b);
              if (t < 0) continue;
              A* gt = rec.data() + b * GH;
              const A* xr = xw_row(b, t);
              const A* z = gt;
              const A* r = gt + H;
              A* hh = gt + 2 * H;
              if (lbr_) {
                for (int64_t k = 0; k < H; ++k)
                  hh[k] = xr[2 * H + k] + r[k] * (hh[k] + dw.rbias_h[size_t(k)]);
              } else {
                for (int64_t k = 0; k < H; ++k) hh[k] += xr[2 * H + k];
              }
              clip(hh, H);
              activate(g, hh, H);
              A* hb = h.data() + b * H;
              for (int64_t k = 0; k < H; ++k) hb[k] = (A(1) - z[k]) * hh[k] + z[k] * hb[k];
            }
          });
        } else {
          const bool peep = !dw.peep.empty();
          parallel_for(B, ew_grain, [&](int64_t bb, int64_t be) {
            for (int64_t b = bb; b < be; ++b) {
              const int64_t t = time_of(b);
              if (t < 0) continue;
              A* gt = rec.data() + b * GH;
              const A* xr = xw_row(b, t);
              for (int64_t k = 0; k < GH; ++k) gt[k] += xr[k];
              A* gi = gt;
              A* go = gt + H;
              A* gf = gt + 2 * H;
              A* gc = gt + 3 * H;
              A* cb = c.data() + b * H;
              if (peep) {
                const A* pi = dw.peep.data();
                const A* pf = dw.peep.data() + 2 * H;
                for (int64_t k = 0; k < H; ++k) {
                  gi[k] += pi[k] * cb[k];
                  gf[k] += pf[k] * cb[k];
                }
              }
              clip(gi, H);
              activate(f, gi, H);
              if (input_forget_) {
                for (int64_t k = 0; k < H; ++k) gf[k] = A(1) - gi[k];
              } else {
                clip(gf, H);
                activate(f, gf, H);
              }
              clip(gc, H);
              activate(g, gc, H);
              for (int64_t k = 0; k < H; ++k) cb[k] = gf[k] * cb[k] + gi[k] * gc[k];
              if (peep) {
                const A* po = dw.peep.data() + H;
                for (int64_t k = 0; k < H; ++k) go[k] += po[k] * cb[k];
              }
              clip(go, H);
              activate(f, go, H);
              // h(C) into gc (no longer needed), then H = o . h(C).
              std::copy(cb, cb + H, gc);
              activate(hact, gc, H);
              A* hb = h.data() + b * H;
              for (int64_t k = 0; k < H; ++k) hb[k] = go[k] * gc[k];
            }
          });
        }
        if (y) {
          for (int64_t b = 0; b < B; ++b) {
            const int64_t t = time_of(b);
            if (t < 0) continue;
            T* dst = y + (layout_ == 0 ? (t * D + dir) * B + b : (b * S + t) * D + dir) * H;
            const A* src = h.data() + b * H;
            for (int64_t k = 0; k < H; ++k) dst[k] = from_arith<T>(src[k]);
          }
        }
      }
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t k = 0; k < H; ++k) {
          if (yh) yh[state_off(dir, b) + k] = from_arith<T>(h[size_t(b * H + k)]);
          if (yc) yc[state_off(dir, b) + k] = from_arith<T>(c[size_t(b * H + k)]);
        }
      }
    }
  }

  Cell cell_;
  int gates_ = 1;
  int acts_per_dir_ = 1;
  int64_t hidden_ = -1;
  int num_dir_ = 1;
  bool reverse_ = false;
  int layout_ = 0;
  float clip_ = 0;  // 0: no clipping
  bool input_forget_ = false;
  bool lbr_ = false;
  std::vector<Activation> acts_;                            // acts_per_dir_ per direction, forward first
  std::optional<std::vector<DirWeights<float>>> const_f_;   // constant weights, fp32 / fp16 / bf16 models
  std::optional<std::vector<DirWeights<double>>> const_d_;  // constant weights, double models
};

}  // namespace

void register_extra_rnn_ops(KernelRegistry& r) {
  const std::pair<const char*, Cell> cells[] = {{"RNN", Cell::RNN}, {"GRU", Cell::GRU}, {"LSTM", Cell::LSTM}};
  for (const auto& [name, cell] : cells) {
    const Cell c = cell;
    r.add(name).set_kernel(
        [c](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<RecurrentKernel>(n, c); });
  }
}

}  // namespace gaf::runtime::extra
