// MatMul (numpy semantics) and Gemm through oneDNN's matmul primitive, fp32 (fp16/bf16 staged through fp32).
// Primitives are built once per input-shape set and cached; constant weights are packed once into the layout
// the primitive prefers. Double and integer types run on a plain loop.
#include <type_traits>

#include "ops/geometry.h"
#include "runtime/kernels/dnnl/dnnl_kernels.h"
#include "runtime/kernels/dnnl/dnnl_util.h"
#include "runtime/kernels/dnnl/post_op_pass.h"
#include "runtime/kernels/fast/gemv.h"

namespace gaf::runtime::dnnl_detail {

namespace {

using dnnl_ops::PostOp;

// One MatMul/Gemm problem in oneDNN terms.
struct Problem {
  Dims out;               // ONNX output dims
  Dims canon;             // output with the M and N dims kept even for 1-D operands: batch + [M, N]
  Dims src, src_strides;  // oneDNN src (A)
  Dims wei, wei_strides;  // oneDNN weights (B)
  Dims dst;               // oneDNN dst (dense)
  int64_t M = 0, N = 0, K = 0, batch = 1;
  bool a_vec = false, b_vec = false;  // 1-D operands (MatMul)
  bool folded = false;                // batch folded into M: [batch*M, K] x [K, N]
};

Dims pad_front(const Dims& d, size_t rank) {
  Dims r(rank - d.size(), 1);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

// MatMul: numpy matmul of `a` and `b`. With `fold`, a batched A times an unbatched B becomes one 2-D product.
Problem matmul_problem(const Node& node, const Dims& a, const Dims& b, bool fold) {
  MatMulShape s = matmul_shape(node, a, b);
  Problem p;
  p.a_vec = s.a_vec;
  p.b_vec = s.b_vec;
  p.M = s.M;
  p.K = s.K;
  p.N = s.N;
  const Dims& ba = s.a_batch;
  const Dims& bb = s.b_batch;
  const Dims& batch = s.batch;
  p.batch = numel_of(batch);
  p.canon = batch;
  p.canon.push_back(p.M);
  p.canon.push_back(p.N);
  p.out = s.out;
  if (fold && numel_of(bb) == 1) {
    p.folded = true;
    p.src = {p.batch * p.M, p.K};
    p.wei = {p.K, p.N};
    p.dst = {p.batch * p.M, p.N};
  } else {
    if (batch.size() + 2 > DNNL_MAX_NDIMS)
      unsupported("{}: MatMul with {} batch dimensions is not supported (at most {})", node.describe(),
                  batch.size(), DNNL_MAX_NDIMS - 2);
    p.src = pad_front(ba, batch.size());
    p.src.push_back(p.M);
    p.src.push_back(p.K);
    p.wei = pad_front(bb, batch.size());
    p.wei.push_back(p.K);
    p.wei.push_back(p.N);
    p.dst = p.canon;
  }
  p.src_strides = contiguous_strides(p.src);
  p.wei_strides = contiguous_strides(p.wei);
  return p;
}

Problem gemm_problem(const Node& node, const Dims& a, const Dims& b, bool trans_a, bool trans_b) {
  GAF_CHECK(a.size() == 2 && b.size() == 2, "{}: Gemm takes 2-D A and B (got {} and {})", node.describe(),
            dims_to_string(a), dims_to_string(b));
  Problem p;
  p.M = trans_a ? a[1] : a[0];
  p.K = trans_a ? a[0] : a[1];
  int64_t kb = trans_b ? b[1] : b[0];
  p.N = trans_b ? b[0] : b[1];
  GAF_CHECK(p.K == kb, "{}: inner dimensions differ: A{} is {} and B{} is {}", node.describe(),
            trans_a ? "'" : "", dims_to_string(a), trans_b ? "'" : "", dims_to_string(b));
  p.src = {p.M, p.K};
  p.out = p.canon = p.dst = {p.M, p.N};
  p.src_strides = trans_a ? Dims{1, p.M} : Dims{p.K, 1};
  p.wei = {p.K, p.N};
  p.wei_strides = trans_b ? Dims{1, p.K} : Dims{p.N, 1};
  return p;
}

// An addend of ONNX dims `ad` in the problem's oneDNN dst space; nullopt when it cannot be expressed there
// (a folded problem whose addend varies along some but not all of the folded dims).
std::optional<Dims> addend_in_dst(const Node& node, const Problem& p, const Dims& ad) {
  Dims padded = addend_dims(node, ad, p.out);
  Dims c = padded;  // canonical: reinsert the M / N dims that 1-D operands dropped
  if (p.a_vec) c.insert(p.b_vec ? c.end() : c.end() - 1, 1);
  if (p.b_vec) c.push_back(1);
  GAF_ASSERT(c.size() == p.canon.size(), "addend_in_dst: rank mismatch");
  if (!p.folded) return c;
  bool all_one = true, all_full = true;
  for (size_t i = 0; i + 1 < c.size(); ++i) {
    all_one &= c[i] == 1;
    all_full &= c[i] == p.canon[i];
  }
  if (all_one) return Dims{1, c.back()};
  if (all_full) return Dims{p.dst[0], c.back()};
  return std::nullopt;
}

// Accumulator of the plain-loop path: double for floating types, the unsigned type of the same width for
// integers (sums wrap instead of overflowing).
template <class T, class = void>
struct RefAcc {
  using type = double;
};
template <class T>
struct RefAcc<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  using type = std::make_unsigned_t<T>;
};

// Y[i, :] for rows [m0, m1) of one product; strided A and B, dense Y. Integer sums wrap like the hardware
// does.
template <class T>
void ref_rows(const T* A, int64_t sam, int64_t sak, const T* B, int64_t sbk, int64_t sbn, T* Y, int64_t N,
              int64_t K, int64_t m0, int64_t m1, std::vector<typename RefAcc<T>::type>& row) {
  using Acc = typename RefAcc<T>::type;
  row.assign(N, Acc(0));
  for (int64_t i = m0; i < m1; ++i) {
    std::fill(row.begin(), row.end(), Acc(0));
    for (int64_t k = 0; k < K; ++k) {
      Acc a = Acc(A[i * sam + k * sak]);
      const T* b = B + k * sbk;
      if (sbn == 1) {
        for (int64_t j = 0; j < N; ++j) row[j] += a * Acc(b[j]);
      } else {
        for (int64_t j = 0; j < N; ++j) row[j] += a * Acc(b[j * sbn]);
      }
    }
    for (int64_t j = 0; j < N; ++j) Y[i * N + j] = T(row[j]);
  }
}

class MatMulKernel final : public Kernel {
 public:
  MatMulKernel(const Node& node, bool gemm, std::vector<PostOp> post_ops)
      : node_(node), gemm_(gemm), user_ops_(std::move(post_ops)) {
    check_post_ops(node, user_ops_, gemm ? 3 : 2);
    if (gemm_) {
      alpha_ = node.attr_float("alpha", 1.f);
      beta_ = node.attr_float("beta", 1.f);
      trans_a_ = node.attr_int("transA", 0) != 0;
      trans_b_ = node.attr_int("transB", 0) != 0;
      use_c_ = node.input(2) != nullptr && beta_ != 0.f;
      if (alpha_ != 1.f) chain_.push_back(PostOp::linear(alpha_, 0.f));
      if (use_c_) {
        addend_src_.push_back(-1);
        addend_pos_.push_back(int(chain_.size()));
        chain_.push_back(PostOp::add(-1));
        if (node.input(2)->is_constant()) c_scaled_ = scaled_float(node.input(2)->constant(), beta_);
      }
    }
    // The user's ops up to the first SiLU/GELU go to the primitive; from there on they run as one pass after it
    // (post_op_pass.h). oneDNN 2.6's swish and gelu post-ops evaluate in the kernel's store phase and measured
    // slower than a pass after it: LLaMA's gate, [256, 512] x [512, 1376] + SiLU, 1.62-1.68 ms with the pass
    // against 1.68-1.76 with the post-op (interleaved minima); the ViT's MLP, [197, 384] x [384, 1536] + GELU, the
    // post-op 155-180 us of 1.24 ms, the pass about 20 us.
    const auto activation = [](const PostOp& op) {
      return op.kind == PostOp::Kind::Swish || op.kind == PostOp::Kind::GeluErf || op.kind == PostOp::Kind::GeluTanh;
    };
    const auto tail = std::find_if(user_ops_.begin(), user_ops_.end(), activation);
    tail_ops_.assign(tail, user_ops_.end());
    for (auto it = user_ops_.begin(); it != tail; ++it) {
      if (it->takes_input()) {
        addend_src_.push_back(it->input);
        addend_pos_.push_back(int(chain_.size()));
      }
      chain_.push_back(*it);
    }
    const Value* b = node.input(1);
    if (b && b->is_constant() && is_dnnl_float(b->constant().dtype())) b_const_ = to_float(b->constant());
    prebuild();
    prepack_gemv();
    if (cache_.empty()) warm_up();  // its primitives are built in the runs, for their shapes
    run_time_shapes_ = !static_input_dims(node_, 0) || !static_input_dims(node_, 1);
  }

  // Weights Gemv holds packed (a decoder's products) are read from that copy alone (every row count runs on
  // Gemv). Unpacking the weights for oneDNN took a 300-token prompt on the 174 MB GPT-2-style decoder from
  // 137-151 to 311-348 ms, most of it the fresh pages' faults.
  bool keeps_own_copy(int i) const override {
    return i == 1 && gemv_ && b_const_.defined() && cache_.empty() && packed_.empty();
  }
  void release_constant(int i) override {
    if (!keeps_own_copy(i)) return;
    b_const_ = Tensor();
  }
  // B's data released (release_constant): gemv_ holds the only copy, for every row count.
  bool b_released() const { return gemv_ && !b_const_.defined(); }

  void run(KernelContext& ctx) override {
    const Tensor& A = ctx.in(0);
    const Tensor& B = ctx.in(1);
    GAF_CHECK(A.dtype() == B.dtype(), "{}: A is {} but B is {}", node_.describe(), dtype_name(A.dtype()),
              dtype_name(B.dtype()));
    const Tensor* C = use_c_ ? ctx.input(2) : nullptr;
    if (C && !C->defined()) C = nullptr;
    GAF_CHECK(!use_c_ || C, "{}: input C is missing", node_.describe());
    if (!is_dnnl_float(A.dtype())) {
      if (!user_ops_.empty())
        unsupported("{}: fused post-ops need a float MatMul/Gemm, not {}", node_.describe(),
                    dtype_name(A.dtype()));
      run_reference(ctx, A, B, C);
      return;
    }
    Dims& key = key_;  // reused: no allocation per run
    key.clear();
    key_append(key, &A);
    key_append(key, &B);
    if (gemm_) key_append(key, C);
    for (int src : addend_src_)
      if (src >= 0) key_append(key, &ctx.in(src));
    Entry* e = cache_.find(key);
    if (!e || (e->plain_weights && ++e->runs == kPackAfterRuns)) {
      std::vector<Dims> addends;
      for (int src : addend_src_) addends.push_back(src >= 0 ? ctx.in(src).dims() : C->dims());
      // Rows known only now, against weights Gemv holds packed already (a decoder's prompt): oneDNN reads the
      // model's weights as they are, and packs its own copy once the shape has recurred.
      auto built = build(A.dims(), B.dims(), addends, /*pack_now=*/e != nullptr || !gemv_);
      if (e)
        *e = std::move(*built);
      else
        e = &cache_.insert(key, std::move(built));
    }
    execute_entry(ctx, *e, A, B, C);
  }

 private:
  struct Entry {
    Problem p;
    bool degenerate = false;  // empty output or K == 0: no oneDNN call
    dnnl::matmul prim;
    size_t scratch = 0;
    memory::desc src_md, wei_md, dst_md;
    memory packed;  // packed constant weights; empty when B is fed at run time
    std::vector<memory::desc> addend_mds;
    std::vector<Dims> addend_padded;  // addend dims in oneDNN dst space before any expansion
    std::vector<bool> addend_expand;  // materialise the addend to the full dst first (broadcast fallback)
    bool bias = false;                // the first addend, a row of N leading the chain, is the primitive's bias
    ArgCache args;                    // the primitive's arguments, re-pointed each run
    std::shared_ptr<const Gemv> gemv;  // a few rows against constant weights: our kernel instead of the primitive
    bool small = false;  // a product too small to pay for building a primitive: a plain loop (small_product)
    // Constant weights read in the model's layout, not packed: a product whose rows are known only at run
    // time and whose weights Gemv holds packed already (a decoder's prompt). Packing a third copy of a 174 MB
    // decoder's weights for one prompt took its first token 57 ms where the plain weights took 38 (steady
    // state 3-12% slower), and 140 MB more; the entry is rebuilt packed on its kPackAfterRuns-th run.
    bool plain_weights = false;
    int runs = 0;
  };
  static constexpr int kPackAfterRuns = 3;

  // A few dense rows of A against constant B large enough to be a stream over the weights (gemv.h); with the
  // weights packed at session start (see prepack_gemv), any number of rows: Gemv runs a group of rows at
  // oneDNN's packed rate, and a prompt's products read the one packed copy instead of the model's weights on a
  // primitive built for that row count (a 128-token prompt on the 174 MB GPT-2-style decoder: 68-89 -> 59-66 ms,
  // 256 tokens 131-144 -> 120-132 ms). Past 256 rows too: on the LLaMA-style decoder (`profile --dim seq=N`,
  // the model's weights kept), 300 tokens 168-215 -> 110-112 ms and 512 tokens 241-268 -> 187-209 ms against
  // oneDNN on the plain weights it reads until it packs its own. Rows go in chunks of kGemvChunkRows, so that a
  // chunk of A stays in cache while every panel of weights passes (512 and 1,024 tokens: the same time as in one
  // chunk, within the noise).
  static constexpr int64_t kGemvChunkRows = 256;
  bool gemv_pays(const Problem& p) const {
    if ((!b_const_.defined() && !gemv_) || p.src.size() != 2 || p.src_strides != Dims{p.K, 1}) return false;
    const bool transposed = p.wei_strides == Dims{1, p.K};
    if (!transposed && p.wei_strides != Dims{p.N, 1}) return false;
    return (p.src[0] <= Gemv::kMaxRows || gemv_) && p.K * p.N >= (int64_t(1) << 16);
  }

  // A 2-D product of at most kSmallMacs multiply-adds whose shapes come at run time: a plain loop, where oneDNN
  // would build a primitive for every new row count (about 1 ms each: a decoder's rotary angles, positions
  // [n, 1] x frequencies [1, 32], at every new prompt length) to save microseconds. Its epilogue then runs as
  // Gemv's does (a NaN stays NaN through a fused Relu, as unfused; oneDNN's post-op makes it 0).
  static constexpr int64_t kSmallMacs = int64_t(1) << 16;
  bool small_pays(const Problem& p) const {
    return run_time_shapes_ && p.src.size() == 2 && p.wei.size() == 2 && p.src[0] * p.src[1] * p.wei[1] <= kSmallMacs;
  }
  // y[M, N] = a[M, K] b[K, N], each operand read through its problem strides.
  static void small_product(const Problem& p, const float* a, const float* b, float* y) {
    const int64_t M = p.src[0], K = p.src[1], N = p.wei[1];
    const int64_t a0 = p.src_strides[0], a1 = p.src_strides[1], b0 = p.wei_strides[0], b1 = p.wei_strides[1];
    for (int64_t i = 0; i < M; ++i) {
      float* yr = y + i * N;
      std::fill_n(yr, N, 0.f);
      for (int64_t k = 0; k < K; ++k) {
        const float av = a[i * a0 + k * a1];
        const float* br = b + k * b0;
        for (int64_t j = 0; j < N; ++j) yr[j] += av * br[j * b1];
      }
    }
  }

  // A product whose rows are only known at run time (a decoder's tokens: the prompt, then one per step) against
  // large constant weights: packs them for Gemv now, at session start, where ONNX Runtime packs its own, rather
  // than in the first run (a 4-layer 768-wide decoder's first step took 60 ms more than the next ones).
  void prepack_gemv() {
    const Value* a = node_.input(0);
    if (!b_const_.defined() || b_const_.rank() != 2 || !a->type.shape || a->type.has_static_shape() ||
        a->type.shape->size() < 2 || (gemm_ && trans_a_))
      return;
    const bool t = gemm_ && trans_b_;
    const int64_t K = b_const_.dim(t ? 1 : 0), N = b_const_.dim(t ? 0 : 1);
    if (K * N >= (int64_t(1) << 16)) gemv_ = std::make_shared<Gemv>(b_const_.data<float>(), K, N, t);
  }

  // Gemm's C must broadcast unidirectionally to [M, N].
  void check_c(const Dims& c, const Dims& out) const {
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); ++i) ok = c[i] == 1 || c[i] == out[out.size() - c.size() + i];
    GAF_CHECK(ok, "{}: input C of shape {} does not broadcast to the output shape {}", node_.describe(),
              dims_to_string(c), dims_to_string(out));
  }

  Problem problem(const Dims& a, const Dims& b, bool fold) const {
    return gemm_ ? gemm_problem(node_, a, b, trans_a_, trans_b_) : matmul_problem(node_, a, b, fold);
  }

  // Builds the primitive for static shapes at session compile time; shape errors surface at run time instead.
  void prebuild() {
    if (!user_ops_.empty()) return;
    std::vector<Dims> dims;
    std::vector<DType> types;
    for (int i = 0; i < (use_c_ ? 3 : 2); ++i) {
      auto d = static_input_dims(node_, i);
      if (!d) return;
      dims.push_back(*d);
      types.push_back(node_.input(i)->type.dtype);
    }
    if (!is_dnnl_float(types[0]) || types[1] != types[0]) return;
    Dims key;
    for (size_t i = 0; i < dims.size(); ++i) key_append(key, dims[i], types[i]);
    if (gemm_ && !use_c_) key.push_back(-1);
    try {
      std::vector<Dims> addends;
      if (use_c_) addends.push_back(dims[2]);
      cache_.insert(key, build(dims[0], dims[1], addends));
    } catch (const Error&) {
    }
  }

  std::unique_ptr<Entry> build(const Dims& a, const Dims& b, const std::vector<Dims>& addends,
                               bool pack_now = true) {
    auto e = std::make_unique<Entry>();
    Problem p = problem(a, b, true);
    if (use_c_) check_c(addends[0], p.out);
    for (const Dims& ad : addends) {
      auto m = addend_in_dst(node_, p, ad);
      if (!m) {
        p = problem(a, b, false);
        break;
      }
    }
    e->p = p;
    for (const Dims& ad : addends) e->addend_padded.push_back(*addend_in_dst(node_, p, ad));
    if (numel_of(p.out) == 0 || p.K == 0) {
      e->degenerate = true;
      return e;
    }
    if (gemv_pays(p)) {
      // One packed copy of the weights per node, whatever the number of rows (a decode step's 1, a batch's 4).
      if (!gemv_) gemv_ = std::make_shared<Gemv>(b_const_.data<float>(), p.K, p.N, p.wei_strides == Dims{1, p.K});
      e->gemv = gemv_;
      return e;
    }
    if (small_pays(p)) {
      e->small = true;
      return e;
    }
    using dt = memory::data_type;
    e->src_md = strided_desc(p.src, p.src_strides);
    memory::desc wei_user = strided_desc(p.wei, p.wei_strides);
    e->dst_md = plain_desc(p.dst);
    const bool pack = b_const_.defined() && pack_now;
    e->plain_weights = b_const_.defined() && !pack_now;
    memory::desc wei_req =
        pack ? memory::desc(memory::dims(p.wei.begin(), p.wei.end()), dt::f32, memory::format_tag::any)
             : wei_user;
    auto make_pd = [&](const std::vector<bool>& expand, bool bias = false) {
      e->addend_mds.clear();
      for (size_t i = 0; i < addends.size(); ++i)
        e->addend_mds.push_back(plain_desc(expand[i] ? p.dst : e->addend_padded[i]));
      dnnl::primitive_attr attr = base_attr();
      if (bias) {
        append_post_ops(attr, std::vector<PostOp>(chain_.begin() + 1, chain_.end()),
                        std::vector<memory::desc>(e->addend_mds.begin() + 1, e->addend_mds.end()));
        return dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->src_md, wei_req, e->addend_mds[0], e->dst_md), attr,
                                            engine());
      }
      append_post_ops(attr, chain_, e->addend_mds);
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->src_md, wei_req, e->dst_md), attr, engine());
    };
    // A chain that starts by adding a row of N (a Linear's bias, Gemm's C of [N]) gives it to the primitive as its
    // bias, added in the kernel: 2-3% faster than the same add as a binary post-op (256x1024x4096, Sapphire
    // Rapids).
    const Dims& first = e->addend_padded.empty() ? p.dst : e->addend_padded[0];
    const bool row = !addend_pos_.empty() && addend_pos_[0] == 0 && chain_[0].kind == PostOp::Kind::Add &&
                     first.size() == p.dst.size() && first.back() == p.dst.back() &&
                     std::all_of(first.begin(), first.end() - 1, [](int64_t d) { return d == 1; });
    dnnl::matmul::primitive_desc pd = dnnl_try(node_, "build this MatMul", [&] {
      e->addend_expand.assign(addends.size(), false);
      if (row) {
        try {
          auto pd_bias = make_pd(e->addend_expand, true);
          if (!is_reference_impl(pd_bias)) {
            e->bias = true;
            return pd_bias;
          }
        } catch (const dnnl::error&) {  // no implementation with this bias: the post-op path below
        }
      }
      auto pd0 = make_pd(e->addend_expand);
      bool broadcast = false;
      for (const Dims& d : e->addend_padded) broadcast |= d != p.dst;
      if (is_reference_impl(pd0) && broadcast) {
        // Some broadcast patterns of binary post-ops have only the slow reference implementation: add the
        // materialised addend instead.
        e->addend_expand.assign(addends.size(), true);
        auto pd1 = make_pd(e->addend_expand);
        if (!is_reference_impl(pd1)) return pd1;
        e->addend_expand.assign(addends.size(), false);
        return make_pd(e->addend_expand);
      }
      return pd0;
    });
    e->prim = dnnl::matmul(pd);
    e->scratch = pd.scratchpad_desc().get_size();
    e->wei_md = pd.weights_desc();
    if (pack) e->packed = packed_weights(wei_user, e->wei_md);
    return e;
  }

  // Constant B in the layout `want`, packed once and shared by entries asking for the same layout.
  memory packed_weights(const memory::desc& user, const memory::desc& want) {
    for (auto& [d, m] : packed_)
      if (d == want) return m;
    memory src = wrap(user, b_const_.raw());
    memory m = src;
    if (want != user) {
      m = memory(want, engine());
      dnnl_try(node_, "pack the weights", [&] { reorder_memory(src, m); });
    }
    packed_.emplace_back(want, m);
    return m;
  }

  Tensor addend_tensor(KernelContext& ctx, int src, const Tensor* C) const {
    if (src >= 0) return to_float(ctx.in(src), ctx.allocator());
    if (c_scaled_.defined()) return c_scaled_;
    if (beta_ == 1.f && is_dnnl_float(C->dtype())) return to_float(*C, ctx.allocator());
    return scaled_float(*C, beta_, ctx.allocator());
  }

  void execute_entry(KernelContext& ctx, Entry& e, const Tensor& A, const Tensor& B, const Tensor* C) {
    const Problem& p = e.p;
    Tensor& Y = ctx.allocate_output(0, A.dtype(), p.out);
    if (Y.numel() == 0) return;
    Tensor Yf = Y.dtype() == DType::Float ? Y : Tensor(DType::Float, p.out, ctx.allocator());
    // K == 0 (the product is zero), a few rows, a small product: then alpha C, and the post-ops in one pass over
    // the output (post_op_pass.h). Running the chain on each panel of Gemv's columns as it was done measured no
    // faster: a 256-token LLaMA-style prompt's 4 gate products with SiLU x up, 16.9-17.7 ms after, 18.0-22.0 ms
    // per panel.
    if (e.degenerate || e.gemv || e.small) {
      float* y = Yf.data<float>();
      if (e.gemv || e.small) {
        Tensor Af = to_float(A, ctx.allocator());
        if (e.gemv) {
          for (int64_t r0 = 0; r0 < p.src[0]; r0 += kGemvChunkRows)
            e.gemv->run(Af.data<float>() + r0 * p.K, std::min(kGemvChunkRows, p.src[0] - r0), p.K, y + r0 * p.N);
        } else {
          const Tensor Bf = b_const_.defined() ? b_const_ : to_float(B, ctx.allocator());
          small_product(p, Af.data<float>(), Bf.data<float>(), y);
        }
        if (alpha_ != 1.f)
          for (int64_t i = 0; i < Yf.numel(); ++i) y[i] *= alpha_;
      } else {
        std::fill_n(y, Yf.numel(), 0.f);
      }
      if (use_c_) {
        Tensor c = addend_tensor(ctx, -1, C);
        Tensor full = expand_float(c, addend_dims(node_, c.dims(), p.out), p.out, ctx.allocator());
        const float* cf = full.data<float>();
        for (int64_t i = 0; i < Yf.numel(); ++i) y[i] += cf[i];
      }
      if (!user_ops_.empty()) PostOpPass(node_, user_ops_, ctx, p.out).apply(y);
    } else {
      Tensor Af = to_float(A, ctx.allocator());
      Tensor Bf;
      if (b_released()) {
        // Weights held only packed for Gemv (release_constant) and a problem Gemv does not take (an addend that
        // keeps the product from folding its rows): unpacked for this run, from the heap, not the pool, which
        // would keep the block.
        Bf = Tensor(DType::Float, B.dims());
        gemv_->unpack(Bf.data<float>());
      } else if (!e.packed) {
        Bf = to_float(B, ctx.allocator());
      }
      ArgCache& args = e.args;
      args.bind(DNNL_ARG_SRC, e.src_md, Af.raw());
      if (e.packed)
        args.set(DNNL_ARG_WEIGHTS, e.packed);
      else
        args.bind(DNNL_ARG_WEIGHTS, e.wei_md, Bf.raw());
      args.bind(DNNL_ARG_DST, e.dst_md, Yf.raw());
      std::vector<Tensor> keep;
      for (size_t i = 0; i < addend_src_.size(); ++i) {
        Tensor t = addend_tensor(ctx, addend_src_[i], C);
        if (e.addend_expand[i]) t = expand_float(t, e.addend_padded[i], p.dst, ctx.allocator());
        if (i == 0 && e.bias)
          args.bind(DNNL_ARG_BIAS, e.addend_mds[0], t.raw());
        else
          args.bind(post_op_src1_arg(addend_pos_[i] - (e.bias ? 1 : 0)), e.addend_mds[i], t.raw());
        keep.push_back(std::move(t));
      }
      execute(e.prim, e.scratch, args.args());
      if (!tail_ops_.empty()) PostOpPass(node_, tail_ops_, ctx, p.out).apply(Yf.data<float>());
    }
    if (Y.dtype() != DType::Float) store_from_float(Yf.data<float>(), Y);
  }

  void run_reference(KernelContext& ctx, const Tensor& A, const Tensor& B, const Tensor* C) {
    Problem p = problem(A.dims(), B.dims(), false);
    if (C) check_c(C->dims(), p.out);
    Tensor& Y = ctx.allocate_output(0, A.dtype(), p.out);
    if (Y.numel() == 0) return;
    visit_dtype(A.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        unsupported("{}: element type {} is not supported", node_.describe(), dtype_name(A.dtype()));
      } else {
        const T* a = A.data<T>();
        const T* b = B.data<T>();
        T* y = Y.data<T>();
        const int64_t M = p.M, N = p.N, K = p.K;
        // Per-batch offsets of A and B (broadcast batch dims read the same matrix).
        const int64_t nb = p.batch;
        std::vector<int64_t> a_off(nb, 0), b_off(nb, 0);
        if (!gemm_) {
          BatchedMatMul bm = batched_matmul(node_, A.dims(), B.dims());
          for (int64_t i = 0; i < nb; ++i) {
            a_off[i] = bm.a_index[i] * M * K;
            b_off[i] = bm.b_index[i] * K * N;
          }
        }
        const int64_t sam = p.src_strides[p.src_strides.size() - 2], sak = p.src_strides.back();
        const int64_t sbk = p.wei_strides[p.wei_strides.size() - 2], sbn = p.wei_strides.back();
        const int64_t rows = nb * M;
        const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, N * K));
        parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
          std::vector<typename RefAcc<T>::type> row;
          for (int64_t r = r0; r < r1;) {
            int64_t bi = r / M, m0 = r % M, m1 = std::min(M, m0 + (r1 - r));
            ref_rows<T>(a + a_off[bi], sam, sak, b + b_off[bi], sbk, sbn, y + bi * M * N, N, K, m0, m1, row);
            r += m1 - m0;
          }
        });
        if (gemm_ && (alpha_ != 1.f || C)) {
          const int64_t n = Y.numel();
          std::vector<double> c(n, 0.0);
          if (C) {
            Dims padded = addend_dims(node_, C->dims(), p.out);
            std::array<Dims, 1> st{broadcast_strides(padded, p.out)};
            visit_dtype(C->dtype(), [&](auto ctag) {
              using CT = decltype(ctag);
              const CT* cp = static_cast<const CT*>(C->raw());
              strided_walk<1>(p.out, st, 0, n,
                              [&](int64_t pos, const std::array<int64_t, 1>& offs, int64_t run,
                                  const std::array<int64_t, 1>& inner) {
                                for (int64_t j = 0; j < run; ++j)
                                  c[pos + j] = to_double(cp[offs[0] + j * inner[0]]);
                              });
            });
          }
          for (int64_t i = 0; i < n; ++i)
            y[i] = from_double<T>(double(alpha_) * to_double(y[i]) + double(beta_) * c[i]);
        }
      }
    });
  }

  const Node& node_;
  bool gemm_;
  std::vector<PostOp> user_ops_;
  std::vector<PostOp> chain_;     // alpha, C (Gemm) then the user's post-ops before the first SiLU/GELU
  std::vector<PostOp> tail_ops_;  // the user's post-ops from that SiLU/GELU on, a pass after the primitive
  std::vector<int> addend_src_;  // per Add in chain_: context input, -1 = Gemm's beta * C
  std::vector<int> addend_pos_;  // per Add: its position in chain_
  float alpha_ = 1.f, beta_ = 1.f;
  bool trans_a_ = false, trans_b_ = false, use_c_ = false;
  Tensor b_const_;   // constant B as fp32
  std::shared_ptr<const Gemv> gemv_;  // B packed for Gemv, shared by the entries of every row count
  bool run_time_shapes_ = false;      // A's or B's dims are known only at run time
  Tensor c_scaled_;  // constant beta * C as fp32
  std::vector<std::pair<memory::desc, memory>> packed_;
  ShapeCache<Entry> cache_;
  Dims key_;  // the cache key of the current run
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_kernel(const Node& node, std::vector<PostOp> post_ops) {
  return std::make_unique<MatMulKernel>(node, false, std::move(post_ops));
}

std::unique_ptr<Kernel> make_gemm_kernel(const Node& node, std::vector<PostOp> post_ops) {
  return std::make_unique<MatMulKernel>(node, true, std::move(post_ops));
}

void register_matmul_ops(KernelRegistry& r) {
  r.add("MatMul").set_kernel([](const Node& n) { return make_matmul_kernel(n, {}); });
  r.add("Gemm").set_kernel([](const Node& n) { return make_gemm_kernel(n, {}); });
}

}  // namespace gaf::runtime::dnnl_detail
