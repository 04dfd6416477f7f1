// Conv and ConvTranspose through oneDNN (fp32; fp16/bf16 staged through fp32), 1 to 3 spatial dims, groups,
// dilations, strides, pads and auto_pad. Activations are plain NCHW tensors; the primitive may compute in its
// preferred blocked layout, with reorders at the boundary (measured faster for all but 1x1 convolutions,
// which run directly on NCHW). Constant weights are packed once.
//
// gaf.Conv with layout = "NHWC" (what the layout-nhwc pass makes of a Conv): activations, output and addends are
// channels-last tensors [N, spatial..., C]; the primitive reads and writes them in place (oneDNN's fastest CPU
// convolutions are channels-last or blocked), so a chain of such convolutions pays no layout reorders. With
// algorithm = "winograd" (the conv-winograd pass) a gaf.Conv runs oneDNN's Winograd convolution, in its blocked
// layout between reorders, and the direct one where oneDNN has no Winograd implementation for it. Double, more
// than 3 spatial dims and shapes oneDNN rejects run on plain loops. An NHWC 1x1 convolution with few input
// channels and a clamp / residual epilogue runs on PointwiseConv (pointwise_conv.h), which beats oneDNN there; an
// NHWC convolution of few output pixels, many channels and constant weights on DirectConv (direct_conv.h), which
// streams its weights from memory faster.
#include <type_traits>

#include "ops/geometry.h"
#include "runtime/kernels/fast/direct_conv.h"
#include "runtime/kernels/dnnl/dnnl_kernels.h"
#include "runtime/kernels/dnnl/plain_conv.h"
#include "runtime/kernels/dnnl/dnnl_util.h"
#include "runtime/kernels/dnnl/post_op_pass.h"
#include "runtime/kernels/fast/pointwise_conv.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime::dnnl_detail {

namespace {

using dnnl_ops::PostOp;
using dt = memory::data_type;

class ConvKernel final : public Kernel {
 public:
  ConvKernel(const Node& node, bool transpose, std::vector<PostOp> post_ops)
      : node_(node), transpose_(transpose), ops_(std::move(post_ops)) {
    check_post_ops(node, ops_, 3);
    chain_ = ops_;
    swish_ = take_trailing_swish(chain_);
    nhwc_ = node.attr_string("layout", "NCHW") == "NHWC";
    winograd_ = node.attr_string("algorithm", "direct") == "winograd";
    GAF_CHECK(!nhwc_ || !transpose, "{}: the NHWC layout is for Conv only", node.describe());
    attrs_ = WindowAttrs::parse(node);
    group_ = node.attr_int("group", 1);
    for (size_t i = 0; i < ops_.size(); ++i)
      if (ops_[i].takes_input()) {
        addend_src_.push_back(ops_[i].input);
        addend_pos_.push_back(int(i));
      }
    const Value* w = node.input(1);
    if (w && w->is_constant() && is_dnnl_float(w->constant().dtype())) w_const_ = to_float(w->constant());
    const Value* b = node.input(2);
    if (b && b->is_constant() && is_dnnl_float(b->constant().dtype())) b_const_ = to_float(b->constant());
    prebuild();
  }

  void run(KernelContext& ctx) override {
    const Tensor& X = ctx.in(0);
    const Tensor& W = ctx.in(1);
    const Tensor* B = ctx.input(2);
    if (B && !B->defined()) B = nullptr;
    GAF_CHECK(W.dtype() == X.dtype() && (!B || B->dtype() == X.dtype()),
              "{}: X, W and B must have one element type (got {}, {}{})", node_.describe(),
              dtype_name(X.dtype()), dtype_name(W.dtype()),
              B ? fmt::format(", {}", dtype_name(B->dtype())) : "");
    Dims& key = key_;  // reused: no allocation per run
    key.clear();
    key_append(key, &X);
    key_append(key, &W);
    key_append(key, B);
    for (int src : addend_src_) key_append(key, &ctx.in(src));
    Entry* e = cache_.find(key);
    if (!e) {
      std::vector<Dims> addends;
      for (int src : addend_src_) addends.push_back(ctx.in(src).dims());
      e = &cache_.insert(key, build(logical(X.dims()), W.dims(), B ? &B->dims() : nullptr, X.dtype(), addends));
    }
    if ((e->pointwise || e->direct) && X.dtype() == DType::Float && run_own(ctx, *e, X)) return;
    // A residual added as a sum post-op starts as the output's contents: when it dies here, its buffer becomes
    // the output and the copy is saved.
    bool in_place = false;
    if (e->sum_addend >= 0 && !e->reference && !e->dst_reorder && X.dtype() == DType::Float) {
      const int src = addend_src_[size_t(e->sum_addend)];
      const Tensor& t = ctx.in(src);
      if (t.dtype() == DType::Float && t.dims() == e->out_physical && ctx.can_take(src)) {
        ctx.set_output(0, t);
        in_place = true;
      }
    }
    Tensor& Y = in_place ? ctx.output(0) : ctx.allocate_output(0, X.dtype(), e->out_physical);
    if (Y.numel() == 0) return;
    if (e->reference)
      run_reference(ctx, *e, X, W, B, Y);
    else
      run_dnnl(ctx, *e, X, W, B, Y, in_place);
  }

 private:
  struct Entry {
    ConvShape s;
    Dims out_physical;       // the output's dims as stored (NHWC: channels last)
    bool reference = false;  // plain loops
    bool pointwise = false;  // a 1x1 NHWC convolution PointwiseConv runs (when its epilogue is one it has)
    bool direct = false;     // an NHWC convolution DirectConv runs (likewise)
    dnnl::primitive prim;
    size_t scratch = 0;
    memory::desc src_user, src_md, wei_user, wei_md, bias_md, dst_user, dst_md;
    // plain <-> the primitive's layouts, when they differ; sum_reorder writes the sum addend into the output
    dnnl::reorder src_reorder, dst_reorder, wei_reorder, sum_reorder;
    memory packed;  // packed constant weights
    std::vector<Dims> addend_padded;
    std::vector<memory::desc> addend_mds;
    std::vector<bool> addend_full;  // read in the output layout: materialised and reordered per run
    std::vector<dnnl::reorder> addend_reorders;
    int sum_addend = -1;  // the addend added as a sum post-op (written into the output buffer first)
    ArgCache args;        // the primitive's arguments, re-pointed each run
  };

  // NHWC: physical [N, spatial..., C] <-> the logical [N, C, spatial...] oneDNN and conv_shape speak.
  Dims logical(const Dims& d) const { return nhwc_ ? channels_last_logical(d) : d; }
  Dims physical(const Dims& d) const { return nhwc_ ? channels_last_physical(d) : d; }
  // The oneDNN descriptor of an activation of logical dims `d` as it lies in memory.
  memory::desc user_desc(const Dims& d) const { return nhwc_ ? channels_last_desc(d) : plain_desc(d); }

  void prebuild() {
    if (!addend_src_.empty()) return;
    auto x = static_input_dims(node_, 0), w = static_input_dims(node_, 1);
    if (!x || !w) return;
    x = logical(*x);
    DType t = node_.input(0)->type.dtype;
    if (node_.input(1)->type.dtype != t) return;
    std::optional<Dims> b;
    if (node_.input(2)) {
      b = static_input_dims(node_, 2);
      if (!b || node_.input(2)->type.dtype != t) return;
    }
    Dims key;
    key_append(key, *x, t);
    key_append(key, *w, t);
    if (b)
      key_append(key, *b, t);
    else
      key.push_back(-1);
    try {
      cache_.insert(key, build(*x, *w, b ? &*b : nullptr, t, {}));
    } catch (const Error&) {
    }
  }

  std::unique_ptr<Entry> build(const Dims& x, const Dims& w, const Dims* b, DType dtype,
                               const std::vector<Dims>& addends) {
    auto e = std::make_unique<Entry>();
    e->s = conv_shape(node_, transpose_, attrs_, group_, x, w, b);
    const ConvShape& s = e->s;
    e->out_physical = physical(s.out);
    for (const Dims& ad : addends)  // NHWC: broadcast against the physical output, then seen logically
      e->addend_padded.push_back(nhwc_ ? logical(addend_dims(node_, ad, physical(s.out))) : addend_dims(node_, ad, s.out));
    bool degenerate = numel_of(s.out) == 0 || s.C == 0 || numel_of(x) == 0;
    e->pointwise = !degenerate && nhwc_ && !transpose_ && !winograd_ && s.G == 1 && dtype == DType::Float &&
                   w_const_.defined() && PointwiseConv::available() && pointwise_pays(s);
    for (int i = 0; i < s.win.rank() && e->pointwise; ++i)
      e->pointwise = s.win.k[size_t(i)] == 1 && s.win.s[size_t(i)] == 1 && s.win.pb[size_t(i)] == 0 &&
                     s.win.pe[size_t(i)] == 0;
    if (e->pointwise && !pw_)
      pw_ = std::make_unique<PointwiseConv>(w_const_.data<float>(), b_const_.defined() ? b_const_.data<float>() : nullptr,
                                            s.M, s.C);
    e->direct = !e->pointwise && !degenerate && nhwc_ && !transpose_ && !winograd_ && s.G == 1 &&
                dtype == DType::Float && w_const_.defined() && s.win.rank() == 2 && DirectConv::available() &&
                direct_pays(s);
    for (int i = 0; i < s.win.rank() && e->direct; ++i)
      e->direct = s.win.d[size_t(i)] == 1 && s.win.pb[size_t(i)] >= 0 && s.win.pe[size_t(i)] >= 0;
    if (e->direct && !direct_)
      direct_ = std::make_unique<DirectConv>(w_const_.data<float>(),
                                             b_const_.defined() ? b_const_.data<float>() : nullptr, s.M, s.C,
                                             s.win.k[0], s.win.k[1]);
    if (!is_dnnl_float(dtype) || s.win.rank() > 3 || degenerate) {
      if (s.win.rank() > 3)
        unsupported("{}: {} spatial dimensions are not supported (at most 3)", node_.describe(),
                    s.win.rank());
      if (nhwc_) unsupported("{}: an NHWC convolution runs on oneDNN only (float types)", node_.describe());
      e->reference = true;
      return e;
    }
    try {
      build_dnnl(*e, x, w, b != nullptr, addends.size());
    } catch (const dnnl::error& err) {
      // A configuration no oneDNN implementation takes (e.g. unusual negative pads): plain loops.
      if (nhwc_) unsupported("{}: oneDNN rejects this NHWC convolution ({})", node_.describe(), err.what());
      e->reference = true;
    }
    return e;
  }

  void build_dnnl(Entry& e, const Dims& x, const Dims& w, bool has_bias, size_t n_addends) {
    const ConvShape& s = e.s;
    const Window& win = s.win;
    const int r = win.rank();
    const int64_t g = s.G, ksz = numel_of(Dims(w.begin() + 2, w.end()));
    Dims kdims(w.begin() + 2, w.end());
    Dims kstr = contiguous_strides(kdims);
    Dims wd, ws;  // oneDNN weights dims {[g,] oc/g, ic/g, k...} over the ONNX storage order
    if (!transpose_) {
      wd = {s.M / g, s.C / g};
      ws = {s.C / g * ksz, ksz};
    } else {  // ONNX [C, M/g, k]: storage (g, ic/g, oc/g, k)
      wd = {s.M / g, s.C / g};
      ws = {ksz, s.M / g * ksz};
    }
    if (g > 1) {
      wd.insert(wd.begin(), g);
      ws.insert(ws.begin(), s.C / g * s.M / g * ksz);
    }
    wd.insert(wd.end(), kdims.begin(), kdims.end());
    ws.insert(ws.end(), kstr.begin(), kstr.end());

    e.src_user = user_desc(x);
    e.wei_user = strided_desc(wd, ws);
    e.dst_user = user_desc(s.out);
    e.bias_md = has_bias ? plain_desc({s.M}) : memory::desc();
    bool pointwise = !transpose_ && g == 1;
    for (int i = 0; i < r; ++i) pointwise &= win.k[i] == 1 && win.pb[i] == 0 && win.pe[i] == 0;
    const auto any = memory::format_tag::any;
    // Weights in the primitive's preferred layout: constant ones are packed once, fed ones reordered per run
    // (a plain-layout request can push oneDNN onto a much slower implementation).
    memory::desc wei_req = memory::desc(e.wei_user.dims(), dt::f32, any);
    memory::dims strides(win.s.begin(), win.s.end()), pl(win.pb.begin(), win.pb.end()),
        pr(win.pe.begin(), win.pe.end()), dil;
    for (int i = 0; i < r; ++i) dil.push_back(win.d[i] - 1);

    // The algorithm being tried, and the activation layouts it asks for: channels-last is what the fast direct
    // kernels take, so no reorders; Winograd computes in its own blocked layout.
    bool winograd = false;
    memory::desc src_req, dst_req;
    auto use_algorithm = [&](bool wino) {
      winograd = wino;
      const bool in_place = (pointwise || nhwc_) && !wino;
      src_req = in_place ? e.src_user : memory::desc(e.src_user.dims(), dt::f32, any);
      dst_req = in_place ? e.dst_user : memory::desc(e.dst_user.dims(), dt::f32, any);
    };
    // `sum_addend`: index of the Add post-op done as a sum into the output (-1: none).
    auto make_pd = [&](const std::vector<memory::desc>* addend_mds, int sum_addend) -> dnnl::primitive_desc {
      const auto alg = winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
      dnnl::primitive_attr attr = base_attr();
      append_post_ops(attr, chain_, *addend_mds, sum_addend);
      const auto fwd = dnnl::prop_kind::forward_inference;
      if (!transpose_) {
        auto d = has_bias ? dnnl::convolution_forward::desc(fwd, alg, src_req, wei_req, e.bias_md, dst_req,
                                                            strides, dil, pl, pr)
                          : dnnl::convolution_forward::desc(fwd, alg, src_req, wei_req, dst_req, strides, dil,
                                                            pl, pr);
        return dnnl::convolution_forward::primitive_desc(d, attr, engine());
      }
      auto d = has_bias
                   ? dnnl::deconvolution_forward::desc(fwd, dnnl::algorithm::deconvolution_direct, src_req,
                                                       wei_req, e.bias_md, dst_req, strides, dil, pl, pr)
                   : dnnl::deconvolution_forward::desc(fwd, dnnl::algorithm::deconvolution_direct, src_req,
                                                       wei_req, dst_req, strides, dil, pl, pr);
      return dnnl::deconvolution_forward::primitive_desc(d, attr, engine());
    };
    // Addends. oneDNN's fast convolutions take broadcast (per-channel) binary addends in plain layout, but
    // not a full-size binary addend (that pushes them onto the reference kernel): a full-size addend is
    // better added as a sum post-op, the addend first written into the output buffer (through the output's
    // reorder when the layout is blocked). Candidates in order, the first that is not oneDNN's reference
    // kernel wins: (1) sum for the first full-size addend, binary for the rest; (2) binary for all, plain
    // layout; (3) binary for all, materialised in the output's layout.
    auto choose = [&]() -> dnnl::primitive_desc {
      e.addend_full.assign(n_addends, false);
      e.addend_mds.clear();
      for (const Dims& d : e.addend_padded) e.addend_mds.push_back(user_desc(d));
      e.sum_addend = -1;
      dnnl::primitive_desc pd;
      for (size_t i = 0; i < n_addends && e.sum_addend < 0; ++i)
        if (e.addend_padded[i] == s.out && ops_[size_t(addend_pos_[i])].kind == PostOp::Kind::Add)
          e.sum_addend = int(i);
      if (e.sum_addend >= 0) {
        try {
          dnnl::primitive_desc pd1 = make_pd(&e.addend_mds, e.sum_addend);
          if (!is_reference_impl(pd1)) pd = pd1;
        } catch (const dnnl::error&) {
        }
        if (!pd) e.sum_addend = -1;
      }
      if (!pd) pd = make_pd(&e.addend_mds, -1);
      if (n_addends > 0 && is_reference_impl(pd) && !nhwc_) {
        std::vector<memory::desc> full(n_addends, pd.dst_desc());
        dnnl::primitive_desc pd1 = make_pd(&full, -1);
        if (!is_reference_impl(pd1) && pd1.dst_desc() == pd.dst_desc()) {
          pd = pd1;
          e.addend_mds = full;
          e.addend_full.assign(n_addends, true);
        }
      }
      return pd;
    };
    // Winograd when asked for and oneDNN has a Winograd kernel for it (with these epilogues), else direct.
    dnnl::primitive_desc pd;
    if (winograd_ && !transpose_) {
      use_algorithm(true);
      try {
        pd = choose();
        if (std::string_view(pd.impl_info_str()).find("wino") == std::string_view::npos) pd = {};
      } catch (const dnnl::error&) {
        pd = {};
      }
    }
    if (!pd) {
      use_algorithm(false);
      pd = choose();
    }
    e.addend_reorders.resize(n_addends);
    for (size_t i = 0; i < n_addends; ++i)
      if (e.addend_full[i])
        e.addend_reorders[i] =
            dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.dst_user, engine(), e.addend_mds[i]));
    e.src_md = pd.src_desc();
    e.dst_md = pd.dst_desc();
    e.wei_md = pd.weights_desc();
    if (e.src_md != e.src_user)
      e.src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.src_user, engine(), e.src_md));
    if (e.dst_md != e.dst_user) {
      e.dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.dst_md, engine(), e.dst_user));
      if (e.sum_addend >= 0)
        e.sum_reorder =
            dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.dst_user, engine(), e.dst_md));
    }
    e.scratch = pd.scratchpad_desc().get_size();
    e.prim = dnnl::primitive(pd);
    if (w_const_.defined())
      e.packed = packed_weights(e.wei_user, e.wei_md);
    else if (e.wei_md != e.wei_user)
      e.wei_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e.wei_user, engine(), e.wei_md));
  }

  memory packed_weights(const memory::desc& user, const memory::desc& want) {
    for (auto& [d, m] : packed_)
      if (d == want) return m;
    memory src = wrap(user, w_const_.raw());
    memory m = src;
    if (want != user) {
      m = memory(want, engine());
      reorder_memory(src, m);
    }
    packed_.emplace_back(want, m);
    return m;
  }

  static Tensor scratch_tensor(const memory::desc& md, KernelContext& ctx) {
    return Tensor(DType::UInt8, {int64_t(md.get_size())}, ctx.allocator());
  }

  // `in_place`: Y already holds the sum addend.
  void run_dnnl(KernelContext& ctx, Entry& e, const Tensor& X, const Tensor& W, const Tensor* B, Tensor& Y,
                bool in_place) {
    Tensor Xf = to_float(X, ctx.allocator());
    Tensor Yf = Y.dtype() == DType::Float ? Y : Tensor(DType::Float, Y.dims(), ctx.allocator());
    std::vector<Tensor> keep;
    ArgCache& args = e.args;
    if (e.src_reorder) {
      keep.push_back(scratch_tensor(e.src_md, ctx));
      memory src = wrap(e.src_md, keep.back().raw());
      memory user = wrap(e.src_user, Xf.raw());
      e.src_reorder.execute(stream(), user, src);
      args.set(DNNL_ARG_SRC, src);
    } else {
      args.bind(DNNL_ARG_SRC, e.src_user, Xf.raw());
    }
    if (e.packed) {
      args.set(DNNL_ARG_WEIGHTS, e.packed);
    } else {
      keep.push_back(to_float(W, ctx.allocator()));
      if (e.wei_reorder) {
        memory user = wrap(e.wei_user, keep.back().raw());
        keep.push_back(scratch_tensor(e.wei_md, ctx));
        memory packed = wrap(e.wei_md, keep.back().raw());
        e.wei_reorder.execute(stream(), user, packed);
        args.set(DNNL_ARG_WEIGHTS, packed);
      } else {
        args.bind(DNNL_ARG_WEIGHTS, e.wei_user, keep.back().raw());
      }
    }
    if (B) {
      keep.push_back(b_const_.defined() ? b_const_ : to_float(*B, ctx.allocator()));
      args.bind(DNNL_ARG_BIAS, e.bias_md, keep.back().raw());
    }
    if (e.dst_reorder) {
      keep.push_back(scratch_tensor(e.dst_md, ctx));
      args.set(DNNL_ARG_DST, wrap(e.dst_md, keep.back().raw()));
    } else {
      args.bind(DNNL_ARG_DST, e.dst_user, Yf.raw());
    }
    memory dst = args.args().at(DNNL_ARG_DST);
    for (size_t i = 0; i < addend_src_.size(); ++i) {
      if (int(i) == e.sum_addend && in_place) continue;
      Tensor t = to_float(ctx.in(addend_src_[i]), ctx.allocator());
      if (int(i) == e.sum_addend) {  // full size: becomes the output's initial value
        if (e.dst_reorder) {
          memory plain = wrap(e.dst_user, t.raw());
          e.sum_reorder.execute(stream(), plain, dst);
        } else {
          parallel_memcpy(Yf.raw(), t.raw(), Yf.nbytes());
        }
        continue;
      }
      if (!e.addend_full[i]) {
        args.bind(post_op_src1_arg(addend_pos_[i]), e.addend_mds[i], t.raw());
        keep.push_back(std::move(t));
        continue;
      }
      if (e.addend_padded[i] != e.s.out) t = expand_float(t, e.addend_padded[i], e.s.out, ctx.allocator());
      keep.push_back(scratch_tensor(e.addend_mds[i], ctx));
      memory m = wrap(e.addend_mds[i], keep.back().raw());
      memory plain = wrap(e.dst_user, t.raw());
      e.addend_reorders[i].execute(stream(), plain, m);
      args.set(post_op_src1_arg(addend_pos_[i]), m);
      keep.push_back(std::move(t));
    }
    execute(e.prim, e.scratch, args.args());
    if (e.dst_reorder) {
      memory user = wrap(e.dst_user, Yf.raw());
      e.dst_reorder.execute(stream(), dst, user);
      stream().wait();
    }
    if (swish_) swish_inplace(Yf.data<float>(), Yf.numel(), *swish_);
    if (Y.dtype() != DType::Float) store_from_float(Yf.data<float>(), Y);
  }

  // The shapes where PointwiseConv beats oneDNN's 1x1 convolution, measured layer by layer on MobileNetV2
  // (`profile --top 0`, 2 threads): few input channels, the expansions (112x112, 16 -> 96: 0.14 -> 0.11 ms;
  // 28x28, 32 -> 192: 26 -> 22 us); the whole model 3% faster. With many input channels (the projections, 144 to
  // 960 -> 24 to 320) oneDNN's blocking over them wins by 10-25%; with 16 output channels or fewer a tile is
  // bound by its broadcasts. That was AMD's Zen 4. On Intel's Sapphire Rapids oneDNN's 1x1 convolution (brgconv)
  // runs near the FMA peak and wins from 24 input channels on (24 -> 144, 56x56: 0.21 -> 0.19 ms; ResNet-50's
  // 64 -> 256, 56x56: 0.38 -> 0.31 ms); with 16 it ties or loses (16 -> 96, 112x112: 0.40 -> 0.45 ms).
  static bool pointwise_pays(const ConvShape& s) {
    static const bool intel = __builtin_cpu_is("intel");
    return s.M > 16 && s.C <= (intel ? 16 : 64);
  }

  // Where DirectConv beats oneDNN's direct convolution (Sapphire Rapids, 2 threads, weights from memory as in a
  // whole network; a standalone chain of distinct weights): at 7x7 outputs, ResNet-50's 512ch 3x3 0.99 -> 0.78 ms,
  // its 2048 -> 512 1x1 0.49 -> 0.38 ms, the stride-2 ones 1.10 -> 0.85 (3x3) and 1.00 -> 0.78 ms (1x1 to 2048),
  // GoogLeNet's 832 -> 384 0.13 -> 0.11 ms, MobileNetV2's 320 -> 1280 0.20 -> 0.14 ms; 1024 -> 128 ties. At 14x14
  // (196 pixels) oneDNN's blocking over the pixels wins by 3-5%. Weights under 256 KiB are left to oneDNN (nothing
  // to stream), and output channels that are not whole panels for two threads: MobileNetV2's 960 -> 160 (two
  // panels and a half one) took 0.08 ms against oneDNN's 0.06.
  static bool direct_pays(const ConvShape& s) {
    const int64_t pixels = numel_of(s.out) / std::max<int64_t>(1, s.M);
    return pixels <= DirectConv::kMaxPixels && s.M >= 2 * DirectConv::kPanel && s.M % DirectConv::kPanel == 0 &&
           s.M * s.C * numel_of(s.win.k) * 4 >= (256 << 10);
  }

  // PointwiseConv or DirectConv with the post-op chain as its epilogue; false (nothing done) for a chain it does
  // not have.
  bool run_own(KernelContext& ctx, Entry& e, const Tensor& X) {
    if (node_.input(2) && !b_const_.defined()) return false;  // a bias fed at run time
    ConvEpilogue ep;
    int take = -1;
    for (const PostOp& op : chain_) {
      float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
      if (op.kind == PostOp::Kind::Relu && op.alpha == 0.f) {
        lo = 0.f;
      } else if (op.kind == PostOp::Kind::Clip) {  // min <= max: check_post_ops, at construction
        lo = op.alpha, hi = op.beta;
      } else if (op.kind == PostOp::Kind::HardSwish && !ep.addend && ep.act == Activation::None) {
        ep.act = Activation::HardSwish;
        continue;
      } else if (op.kind == PostOp::Kind::Add && !ep.addend) {
        const Tensor& t = ctx.in(op.input);
        if (t.dtype() != DType::Float || t.dims() != e.out_physical) return false;
        ep.addend = t.data<float>();
        if (ctx.can_take(op.input)) take = op.input;
        continue;
      } else {
        return false;
      }
      if (!ep.addend && ep.act != Activation::None) return false;  // a clamp after the activation: none here
      float& l = ep.addend ? ep.lo2 : ep.lo;  // a clamp before the addend, or after it
      float& h = ep.addend ? ep.hi2 : ep.hi;
      // clamp(clamp(v, l, h), lo, hi) = clamp(v, clamp(l, lo, hi), clamp(h, lo, hi))
      l = std::clamp(l, lo, hi), h = std::clamp(h, lo, hi);
    }
    // The trailing Swish in the epilogue, on the tile in registers, unless it follows the residual or another
    // activation (then a pass after, as on oneDNN's path).
    const bool swish_in_tile = swish_ && !ep.addend && ep.act == Activation::None;
    if (swish_in_tile) ep.act = Activation::Swish, ep.alpha = *swish_;
    if (take >= 0) ctx.set_output(0, ctx.in(take));  // a dying residual's buffer: read, then overwritten in place
    Tensor& Y = take >= 0 ? ctx.output(0) : ctx.allocate_output(0, DType::Float, e.out_physical);
    if (e.pointwise) {
      pw_->run(X.data<float>(), X.numel() / pw_->k(), Y.data<float>(), ep);
    } else {
      const Window& w = e.s.win;
      direct_->run(X.data<float>(),
                   {.n = e.s.N, .h = w.in[0], .w = w.in[1], .oh = w.out[0], .ow = w.out[1], .sh = w.s[0],
                    .sw = w.s[1], .ph = w.pb[0], .pw = w.pb[1]},
                   Y.data<float>(), ep);
    }
    if (swish_ && !swish_in_tile) swish_inplace(Y.data<float>(), Y.numel(), *swish_);
    return true;
  }

  void run_reference(KernelContext& ctx, Entry& e, const Tensor& X, const Tensor& W, const Tensor* B,
                     Tensor& Y) {
    const ConvShape& s = e.s;
    ConvDims cd(s.N, s.C, s.M, s.G, s.win);
    if (is_dnnl_float(X.dtype())) {
      Tensor Xf = to_float(X, ctx.allocator()), Wf = to_float(W, ctx.allocator());
      Tensor Bf = B ? to_float(*B, ctx.allocator()) : Tensor();
      Tensor Yf = Y.dtype() == DType::Float ? Y : Tensor(DType::Float, Y.dims(), ctx.allocator());
      compute_reference<float>(cd, Xf.data<float>(), Wf.data<float>(), B ? Bf.data<float>() : nullptr,
                               Yf.data<float>());
      PostOpPass(node_, ops_, ctx, s.out).apply(Yf.data<float>());
      if (Y.dtype() != DType::Float) store_from_float(Yf.data<float>(), Y);
      return;
    }
    if (X.dtype() != DType::Double)
      unsupported("{}: element type {} is not supported (float, float16, bfloat16, double)", node_.describe(),
                  dtype_name(X.dtype()));
    if (!ops_.empty()) unsupported("{}: fused post-ops need a float Conv, not double", node_.describe());
    compute_reference<double>(cd, X.data<double>(), W.data<double>(), B ? B->data<double>() : nullptr,
                              Y.data<double>());
  }

  template <class T>
  void compute_reference(const ConvDims& cd, const T* x, const T* w, const T* b, T* y) {
    if (transpose_) {
      ref_conv_transpose<double, T>(cd, x, w, b, y);
      return;
    }
    ref_conv<double>(cd, x, 0.0, w, nullptr, [&](int64_t n, int64_t m, const double* acc, int64_t size) {
      T* yp = y + (n * cd.M + m) * size;
      const double bv = b ? double(b[m]) : 0.0;
      for (int64_t i = 0; i < size; ++i) yp[i] = T(acc[i] + bv);
    });
  }

  const Node& node_;
  bool transpose_;
  bool nhwc_ = false;
  bool winograd_ = false;
  std::vector<PostOp> ops_;
  std::vector<PostOp> chain_;   // what oneDNN applies: ops_ less a trailing Swish
  std::optional<float> swish_;  // that Swish's alpha, applied by swish_inplace after the primitive
  std::vector<int> addend_src_, addend_pos_;
  WindowAttrs attrs_;
  int64_t group_ = 1;
  Tensor w_const_, b_const_;
  std::vector<std::pair<memory::desc, memory>> packed_;
  ShapeCache<Entry> cache_;
  Dims key_;  // the cache key of the current run
  std::unique_ptr<PointwiseConv> pw_;  // packed once, for the 1x1 entries that run on it
  std::unique_ptr<DirectConv> direct_;  // likewise, for the entries DirectConv runs
};

}  // namespace

std::unique_ptr<Kernel> make_conv_kernel(const Node& node, std::vector<PostOp> post_ops) {
  return std::make_unique<ConvKernel>(node, false, std::move(post_ops));
}

void register_conv_ops(KernelRegistry& r) {
  r.add("Conv").set_kernel([](const Node& n) { return make_conv_kernel(n, {}); });
  // gaf.Conv: Conv on channels-last activations (attribute layout = "NHWC"), from the layout-nhwc pass.
  r.add("Conv", "gaf").set_kernel([](const Node& n) { return make_conv_kernel(n, {}); });
  r.add("ConvTranspose").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ConvKernel>(n, true, std::vector<PostOp>{});
  });
}

}  // namespace gaf::runtime::dnnl_detail
