#include "runtime/kernels/dnnl/dnnl_util.h"

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "ops/simd_math.h"

namespace gaf::runtime::dnnl_detail {

using dnnl_ops::PostOp;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  // oneDNN streams are not meant to be shared between threads: one per thread (sessions may run
  // concurrently).
  thread_local dnnl::stream s(engine());
  return s;
}

memory::desc plain_desc(const Dims& dims, memory::data_type dt) {
  return strided_desc(dims, contiguous_strides(dims), dt);
}

memory::desc strided_desc(const Dims& dims, const Dims& strides, memory::data_type dt) {
  if (dims.empty()) return memory::desc(memory::dims{1}, dt, memory::dims{1});
  return memory::desc(memory::dims(dims.begin(), dims.end()), dt,
                      memory::dims(strides.begin(), strides.end()));
}

dnnl::primitive_attr base_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

namespace {
// One growing 64-byte aligned buffer per thread; primitives run one at a time on a thread.
struct Scratch {
  void* p = nullptr;
  size_t size = 0;
  ~Scratch() { std::free(p); }
  void* get(size_t bytes) {
    if (bytes > size) {
      std::free(p);
      size = (bytes + 4095) / 4096 * 4096;
      p = std::aligned_alloc(64, size);
      if (!p) throw std::bad_alloc();
    }
    return p;
  }
};
thread_local Scratch t_scratch;
}  // namespace

void execute(const dnnl::primitive& prim, size_t scratch_bytes, std::unordered_map<int, memory>& args) {
  if (scratch_bytes > 0) {
    // One memory object per scratchpad size and thread, pointed at the thread's buffer (which may have moved).
    thread_local std::unordered_map<size_t, memory> by_size;
    void* p = t_scratch.get(scratch_bytes);
    auto it = by_size.find(scratch_bytes);
    if (it == by_size.end()) {
      memory::desc sd(memory::dims{int64_t(scratch_bytes)}, memory::data_type::u8, memory::format_tag::a);
      it = by_size.emplace(scratch_bytes, memory(sd, engine(), p)).first;
    } else if (it->second.get_data_handle() != p) {
      it->second.set_data_handle(p);
    }
    args[DNNL_ARG_SCRATCHPAD] = it->second;
  }
  prim.execute(stream(), args);
  stream().wait();
}

void warm_up() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      const memory::desc md = plain_desc({16, 16});
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), base_attr(), engine());
      const dnnl::matmul prim(pd);
      std::vector<float> x(16 * 16, 0.f), y(16 * 16);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(md, engine(), x.data())},
                                           {DNNL_ARG_WEIGHTS, memory(md, engine(), x.data())},
                                           {DNNL_ARG_DST, memory(md, engine(), y.data())}};
      execute(prim, pd.scratchpad_desc().get_size(), args);
    } catch (const dnnl::error&) {
      // Only a warm-up: the kernels report their own failures.
    }
  });
}

void reorder_memory(const memory& from, const memory& to) {
  dnnl::reorder r(from, to);
  r.execute(stream(), const_cast<memory&>(from), const_cast<memory&>(to));
  stream().wait();
}

bool is_reference_impl(const dnnl::primitive_desc_base& pd) {
  std::string impl = pd.impl_info_str();
  return impl.rfind("ref", 0) == 0;
}

Tensor to_float(const Tensor& t, Allocator& alloc) {
  if (t.dtype() == DType::Float) return t;
  Tensor out(DType::Float, t.dims(), alloc);
  float* o = out.data<float>();
  const uint16_t* in = static_cast<const uint16_t*>(t.raw());
  if (t.dtype() == DType::Float16) {
    parallel_for(t.numel(), 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = half_to_float(in[i]);
    });
  } else {
    GAF_ASSERT(t.dtype() == DType::BFloat16, "to_float: unexpected element type");
    parallel_for(t.numel(), 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = bf16_to_float(in[i]);
    });
  }
  return out;
}

void store_from_float(const float* src, Tensor& dst) {
  if (dst.dtype() == DType::Float) {
    if (dst.raw() != src) std::memcpy(dst.raw(), src, dst.nbytes());
    return;
  }
  uint16_t* o = static_cast<uint16_t*>(dst.raw());
  if (dst.dtype() == DType::Float16) {
    parallel_for(dst.numel(), 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = float_to_half(src[i]);
    });
  } else {
    GAF_ASSERT(dst.dtype() == DType::BFloat16, "store_from_float: unexpected element type");
    parallel_for(dst.numel(), 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = float_to_bf16(src[i]);
    });
  }
}

Tensor scaled_float(const Tensor& t, float scale, Allocator& alloc) {
  Tensor out(DType::Float, t.dims(), alloc);
  float* o = out.data<float>();
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(t.raw());
    parallel_for(t.numel(), 32768, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = float(to_double(in[i])) * scale;
    });
  });
  return out;
}

Tensor expand_float(const Tensor& t, const Dims& padded, const Dims& full, Allocator& alloc) {
  Tensor out(DType::Float, full, alloc);
  float* o = out.data<float>();
  const float* in = t.data<float>();
  std::array<Dims, 1> strides{broadcast_strides(padded, full)};
  parallel_for(out.numel(), 32768, [&](int64_t b, int64_t e) {
    strided_walk<1>(full, strides, b, e,
                    [&](int64_t pos, const std::array<int64_t, 1>& offs, int64_t run,
                        const std::array<int64_t, 1>& inner) {
                      for (int64_t j = 0; j < run; ++j) o[pos + j] = in[offs[0] + j * inner[0]];
                    });
  });
  return out;
}

Dims channels_last_physical(const Dims& d) {
  if (d.size() < 3) return d;
  Dims p = {d[0]};
  p.insert(p.end(), d.begin() + 2, d.end());
  p.push_back(d[1]);
  return p;
}

memory::desc channels_last_desc(const Dims& logical, memory::data_type dt) {
  return strided_desc(logical, channels_last_logical(contiguous_strides(channels_last_physical(logical))), dt);
}

memory wrap(const memory::desc& md, const void* data) {
  return memory(md, engine(), const_cast<void*>(data));
}

std::optional<float> take_trailing_swish(std::vector<PostOp>& chain) {
  if (chain.empty() || chain.back().kind != PostOp::Kind::Swish) return std::nullopt;
  const float alpha = chain.back().alpha;
  chain.pop_back();
  return alpha;
}

namespace {
// y[i] = f(y[i]) over n floats in place, across the OpenMP threads: fv on simd::kW lanes (the last vector
// masked) where simd_vec.h has a vector, f1 one at a time otherwise.
template <class FV, class F1>
void map_inplace(float* y, int64_t n, [[maybe_unused]] FV fv, F1 f1) {
  parallel_for(n, 16384, [&](int64_t b, int64_t e) {
    int64_t i = b;
#if defined(GAF_SIMD)
    simd::map(y + b, y + b, e - b, fv);
    i = e;
#endif
    for (; i < e; ++i) y[i] = f1(y[i]);
  });
}
}  // namespace

void swish_inplace(float* y, int64_t n, float alpha) {
#if defined(GAF_SIMD)
  const simd::vf c = simd::set1(-alpha * 1.44269504088896341f);
  auto fv = [c](simd::vf v) { return simd::swishv(v, c); };
#else
  auto fv = nullptr;
#endif
  map_inplace(y, n, fv, [alpha](float v) { return simd::swish(v, alpha); });
}

void ArgCache::bind(int arg, const memory::desc& md, const void* data) {
  auto it = args_.find(arg);
  if (it == args_.end())
    args_.emplace(arg, wrap(md, data));
  else
    it->second.set_data_handle(const_cast<void*>(data));
}

namespace {

dnnl::algorithm unary_algorithm(PostOp::Unary f) {
  using A = dnnl::algorithm;
  switch (f) {
    case PostOp::Unary::Sigmoid: return A::eltwise_logistic;
    case PostOp::Unary::Tanh: return A::eltwise_tanh;
    case PostOp::Unary::Abs: return A::eltwise_abs;
    case PostOp::Unary::Exp: return A::eltwise_exp;
    case PostOp::Unary::Sqrt: return A::eltwise_sqrt;
    case PostOp::Unary::Log: return A::eltwise_log;
    case PostOp::Unary::Elu: return A::eltwise_elu;
    case PostOp::Unary::Mish: return A::eltwise_mish;
    case PostOp::Unary::Round: return A::eltwise_round;
    case PostOp::Unary::Pow: return A::eltwise_pow;
    case PostOp::Unary::Softplus: return A::eltwise_soft_relu;
  }
  return A::eltwise_linear;
}

dnnl::algorithm binary_algorithm(PostOp::BinaryOp op) {
  using A = dnnl::algorithm;
  switch (op) {
    case PostOp::BinaryOp::Mul: return A::binary_mul;
    case PostOp::BinaryOp::Sub: return A::binary_sub;
    case PostOp::BinaryOp::Div: return A::binary_div;
    case PostOp::BinaryOp::Max: return A::binary_max;
    case PostOp::BinaryOp::Min: return A::binary_min;
  }
  return A::binary_add;
}

}  // namespace

std::optional<EltwiseForm> eltwise_form(const PostOp& op) {
  using A = dnnl::algorithm;
  switch (op.kind) {
    case PostOp::Kind::Relu: return EltwiseForm{A::eltwise_relu, op.alpha, 0.f};
    case PostOp::Kind::GeluErf: return EltwiseForm{A::eltwise_gelu_erf, 0.f, 0.f};
    case PostOp::Kind::GeluTanh: return EltwiseForm{A::eltwise_gelu_tanh, 0.f, 0.f};
    case PostOp::Kind::Swish: return EltwiseForm{A::eltwise_swish, op.alpha, 0.f};
    case PostOp::Kind::HardSwish: return EltwiseForm{A::eltwise_hardswish, 0.f, 0.f};
    case PostOp::Kind::Clip:
      // brgconv/brgemm kernels take bounded_relu and clip but not clip_v2 (which drops convs to gemm:jit,
      // several times slower); for a finite min/max the three agree.
      if (op.alpha == 0.f) return EltwiseForm{A::eltwise_bounded_relu, op.beta, 0.f};
      return EltwiseForm{A::eltwise_clip, op.alpha, op.beta};
    case PostOp::Kind::Linear: return EltwiseForm{A::eltwise_linear, op.alpha, op.beta};
    case PostOp::Kind::Eltwise: return EltwiseForm{unary_algorithm(op.eltwise), op.alpha, op.beta};
    case PostOp::Kind::Binary:
    case PostOp::Kind::Add: return std::nullopt;
  }
  return std::nullopt;
}

void append_post_ops(dnnl::primitive_attr& attr, const std::vector<PostOp>& ops,
                     const std::vector<memory::desc>& addend_descs, int sum_addend) {
  if (ops.empty()) return;
  dnnl::post_ops po;
  size_t addend = 0;
  for (const PostOp& op : ops) {
    if (auto f = eltwise_form(op)) {
      po.append_eltwise(1.f, f->alg, f->alpha, f->beta);
    } else if (op.kind == PostOp::Kind::Binary) {
      GAF_ASSERT(addend < addend_descs.size(), "append_post_ops: missing operand descriptor");
      po.append_binary(binary_algorithm(op.binary), addend_descs[addend]);
      ++addend;
    } else {  // Add
      GAF_ASSERT(addend < addend_descs.size(), "append_post_ops: missing addend descriptor");
      if (int(addend) == sum_addend)
        po.append_sum(1.f);
      else
        po.append_binary(dnnl::algorithm::binary_add, addend_descs[addend]);
      ++addend;
    }
  }
  attr.set_post_ops(po);
}

void check_post_ops(const Node& node, const std::vector<PostOp>& ops, int first_extra_input) {
  for (const PostOp& op : ops) {
    if (op.takes_input())
      GAF_CHECK(op.input >= first_extra_input, "{}: post-op Add needs a context input index >= {} (got {})",
                node.describe(), first_extra_input, op.input);
    if (op.kind == PostOp::Kind::Clip)
      GAF_CHECK(!(op.alpha > op.beta), "{}: post-op Clip has min {} > max {}", node.describe(), op.alpha,
                op.beta);
  }
}

Dims addend_dims(const Node& node, const Dims& addend, const Dims& out) {
  GAF_CHECK(addend.size() <= out.size(), "{}: addend of shape {} has a higher rank than the output {}",
            node.describe(), dims_to_string(addend), dims_to_string(out));
  Dims d(out.size() - addend.size(), 1);
  d.insert(d.end(), addend.begin(), addend.end());
  for (size_t i = 0; i < d.size(); ++i)
    GAF_CHECK(d[i] == out[i] || d[i] == 1, "{}: addend of shape {} does not broadcast to the output shape {}",
              node.describe(), dims_to_string(addend), dims_to_string(out));
  return d;
}

float eltwise_ref(const PostOp& op, float x) {
  switch (op.kind) {
    case PostOp::Kind::Relu:
      return x > 0.f ? x : op.alpha * x;
    case PostOp::Kind::GeluErf:
      return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
    case PostOp::Kind::GeluTanh:
      return 0.5f * x * (1.f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case PostOp::Kind::Swish:
      return x / (1.f + std::exp(-op.alpha * x));
    case PostOp::Kind::HardSwish:
      return x * std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f;
    case PostOp::Kind::Clip:
      return std::min(std::max(x, op.alpha), op.beta);
    case PostOp::Kind::Linear:
      return op.alpha * x + op.beta;
    case PostOp::Kind::Eltwise:
      switch (op.eltwise) {
        case PostOp::Unary::Sigmoid: return 1.f / (1.f + std::exp(-x));
        case PostOp::Unary::Tanh: return std::tanh(x);
        case PostOp::Unary::Abs: return std::fabs(x);
        case PostOp::Unary::Exp: return std::exp(x);
        case PostOp::Unary::Sqrt: return std::sqrt(x);
        case PostOp::Unary::Log: return std::log(x);
        case PostOp::Unary::Elu: return x > 0.f ? x : op.alpha * (std::exp(x) - 1.f);
        case PostOp::Unary::Mish: return x * std::tanh(std::log1p(std::exp(x)));
        case PostOp::Unary::Round: return std::nearbyint(x);
        case PostOp::Unary::Pow: return op.alpha * std::pow(x, op.beta);
        case PostOp::Unary::Softplus: return std::log1p(std::exp(x));
      }
      break;
    case PostOp::Kind::Add:
    case PostOp::Kind::Binary:
      break;
  }
  return x;
}

}  // namespace gaf::runtime::dnnl_detail

namespace gaf::runtime::dnnl_ops {

bool normalize_post_ops(std::vector<PostOp>& ops, std::string* why) {
  std::vector<PostOp> out;
  for (const PostOp& op : ops) {
    PostOp* prev = out.empty() ? nullptr : &out.back();
    if (prev && prev->kind == PostOp::Kind::Linear && op.kind == PostOp::Kind::Linear) {
      // a2 (a1 x + b1) + b2
      prev->beta = op.alpha * prev->beta + op.beta;
      prev->alpha *= op.alpha;
    } else if (prev && prev->kind == PostOp::Kind::Clip && op.kind == PostOp::Kind::Clip) {
      // clamp(clamp(x, l1, h1), l2, h2) = clamp(x, clamp(l1, l2, h2), clamp(h1, l2, h2))
      prev->alpha = std::clamp(prev->alpha, op.alpha, op.beta);
      prev->beta = std::clamp(prev->beta, op.alpha, op.beta);
    } else {
      out.push_back(op);
    }
  }
  // oneDNN 2.6 keeps one parameter set per eltwise algorithm in a chain: two post-ops of one algorithm must agree.
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = i + 1; j < out.size(); ++j) {
      const auto a = dnnl_detail::eltwise_form(out[i]), b = dnnl_detail::eltwise_form(out[j]);
      if (a && b && a->alg == b->alg && (a->alpha != b->alpha || a->beta != b->beta)) {
        if (why)
          *why = fmt::format("two {} post-ops with different parameters (oneDNN 2.6 would apply the first's to both)",
                             post_op_name(out[i].kind));
        return false;
      }
    }
  ops = std::move(out);
  return true;
}

std::string_view post_op_name(PostOp::Kind k) {
  switch (k) {
    case PostOp::Kind::Relu:
      return "Relu";
    case PostOp::Kind::GeluErf:
      return "GeluErf";
    case PostOp::Kind::GeluTanh:
      return "GeluTanh";
    case PostOp::Kind::Swish:
      return "Swish";
    case PostOp::Kind::HardSwish:
      return "HardSwish";
    case PostOp::Kind::Clip:
      return "Clip";
    case PostOp::Kind::Linear:
      return "Linear";
    case PostOp::Kind::Add:
      return "Add";
    case PostOp::Kind::Eltwise:
      return "Eltwise";
    case PostOp::Kind::Binary:
      return "Binary";
  }
  return "?";
}

}  // namespace gaf::runtime::dnnl_ops
