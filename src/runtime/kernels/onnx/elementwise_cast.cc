// Cast and CastLike between every numeric type, bool, fp16/bf16 and string.
//
// Conversion rules: integer -> integer wraps modulo 2^bits (C++20); floating -> integer truncates toward zero
// and saturates at the target's limits, NaN -> 0 (C++ leaves both undefined); anything -> bool is `!= 0`;
// double -> fp16/bf16 rounds through fp32. Numbers -> string print the shortest text that reads back to the
// same value (Python style: "1.0", "0.1", "1e-05", "nan", "inf"; bool as "True"/"False"); string -> numbers
// accepts decimal and scientific notation, a leading '+', "inf"/"INF"/"infinity" and "nan" in any case, and
// for bool also "true"/"false".
#include <cctype>
#include <charconv>
#include <cstring>
#include <string>
#include <variant>

#include "runtime/kernels/onnx/elementwise_util.h"

namespace gaf::runtime::ew {

namespace {

// One value between non-16-bit types.
template <class D, class S>
inline D convert(S v) {
  if constexpr (std::is_same_v<D, S>)
    return v;
  else if constexpr (std::is_same_v<D, bool>)
    return v != S(0);
  else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>)
    return saturate_cast<D>(v);
  else
    return static_cast<D>(v);
}

template <class D, class S>
void cast_range(const S* in, D* out, int64_t n) {
  if constexpr (std::is_same_v<S, bool>) {
    // Read bools as their bytes (0 / 1): GCC 12 does not vectorise conversions from bool.
    cast_range(reinterpret_cast<const uint8_t*>(in), out, n);
  } else if constexpr (!is_f16_v<S> && !is_f16_v<D>) {
    for (int64_t i = 0; i < n; ++i) out[i] = convert<D>(in[i]);
  } else {
    alignas(64) float buf[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      int64_t m = std::min(kBlock, n - b);
      if constexpr (is_f16_v<S>)
        to_float(in + b, buf, m);
      else
        for (int64_t i = 0; i < m; ++i) buf[i] = convert<float>(in[b + i]);
      if constexpr (is_f16_v<D>)
        from_float(buf, out + b, m);
      else
        for (int64_t i = 0; i < m; ++i) out[b + i] = convert<D>(buf[i]);
    }
  }
}

// ---- numbers -> string --------------------------------------------------------------------------

// Python-style float text: shortest round-trip digits, and ".0" on integral values.
std::string float_text(std::string s) {
  if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
  return s;
}

// Shortest %g text that converts back to the same 16-bit value.
template <class S>
std::string f16_text(S v) {
  float f = load_f(v);
  if (!std::isfinite(f)) return fmt::format("{}", f);
  for (int p = 1; p < 9; ++p) {
    std::string s = fmt::format("{:.{}g}", f, p);
    if (store_c<S>(std::strtof(s.c_str(), nullptr)).bits == v.bits) return float_text(s);
  }
  return float_text(fmt::format("{}", f));
}

template <class S>
std::string to_text(S v) {
  if constexpr (std::is_same_v<S, bool>)
    return v ? "True" : "False";
  else if constexpr (is_f16_v<S>)
    return f16_text(v);
  else if constexpr (std::is_floating_point_v<S>)
    return float_text(fmt::format("{}", v));
  else
    return fmt::format("{}", v);
}

// ---- string -> numbers --------------------------------------------------------------------------

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

bool parse_double(std::string_view s, double& v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

template <class D>
D parse_text(const std::string& text, const Node& n) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
  if constexpr (std::is_same_v<D, bool>) {
    if (iequals(s, "true")) return true;
    if (iequals(s, "false")) return false;
  }
  if constexpr (std::is_integral_v<D>) {
    // Exact integer text first (int64 / uint64 keep every digit), then scientific or fractional text.
    using W = std::conditional_t<std::is_signed_v<D> || std::is_same_v<D, bool>, int64_t, uint64_t>;
    W w;
    auto r = std::from_chars(s.data(), s.data() + s.size(), w);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return convert<D>(w);
  }
  double v;
  if (parse_double(s, v)) {
    if constexpr (is_f16_v<D>)
      return store_c<D>(float(v));
    else
      return convert<D>(v);
  }
  fail("{}: cannot convert the string \"{}\" to {}", n.describe(), text, dtype_name(DTypeOf<D>::value));
}

// ---- the kernel ---------------------------------------------------------------------------------

bool castable(DType t) {
  switch (t) {
    case DType::Float:
    case DType::UInt8:
    case DType::Int8:
    case DType::UInt16:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::String:
    case DType::Bool:
    case DType::Float16:
    case DType::Double:
    case DType::UInt32:
    case DType::UInt64:
    case DType::BFloat16:
      return true;
    case DType::Undefined:
      break;
  }
  return false;
}

void cast_to(KernelContext& ctx, const Tensor& x, DType to) {
  const Node& n = ctx.node();
  GAF_CHECK(castable(x.dtype()), "{}: cannot cast from element type {}", n.describe(), dtype_name(x.dtype()));
  if (to == x.dtype()) {  // no conversion: share the input's storage
    ctx.set_output(0, x);
    return;
  }
  Tensor& y = ctx.allocate_output(0, to, x.dims());
  const int64_t count = x.numel();
  if (x.dtype() == DType::String) {
    const std::string* in = x.strings();
    visit_dtype(to, [&](auto tag) {
      using D = decltype(tag);
      D* out = y.data<D>();
      for (int64_t i = 0; i < count; ++i) out[i] = parse_text<D>(in[i], n);
    });
  } else if (to == DType::String) {
    std::string* out = y.strings();
    visit_dtype(x.dtype(), [&](auto tag) {
      using S = decltype(tag);
      const S* in = x.data<S>();
      for (int64_t i = 0; i < count; ++i) out[i] = to_text(in[i]);
    });
  } else {
    visit_dtype(x.dtype(), [&](auto stag) {
      using S = decltype(stag);
      visit_dtype(to, [&](auto dtag) {
        using D = decltype(dtag);
        const S* in = x.data<S>();
        D* out = y.data<D>();
        parallel_for(count, 32768, [&](int64_t b, int64_t e) { cast_range(in + b, out + b, e - b); });
      });
    });
  }
}

// Cast-1 (opset < 6) names the target type with a string attribute: "FLOAT", "INT64", ...
int64_t legacy_cast_target(const Node& n, const std::string& name) {
  static const std::pair<const char*, DType> kNames[] = {
      {"FLOAT", DType::Float},     {"UINT8", DType::UInt8},      {"INT8", DType::Int8},
      {"UINT16", DType::UInt16},   {"INT16", DType::Int16},      {"INT32", DType::Int32},
      {"INT64", DType::Int64},     {"STRING", DType::String},    {"BOOL", DType::Bool},
      {"FLOAT16", DType::Float16}, {"DOUBLE", DType::Double},    {"UINT32", DType::UInt32},
      {"UINT64", DType::UInt64},   {"BFLOAT16", DType::BFloat16}};
  for (const auto& [text, t] : kNames)
    if (iequals(name, text)) return int64_t(t);
  unsupported("{}: casting to element type \"{}\" is not supported", n.describe(), name);
}

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(const Node& n) {
    auto it = n.attrs.find("to");
    int64_t to = it != n.attrs.end() && std::holds_alternative<std::string>(it->second)
                     ? legacy_cast_target(n, std::get<std::string>(it->second))
                     : n.attr_int("to");
    DType t = static_cast<DType>(to);
    if (!castable(t) || to != int64_t(t)) {
      unsupported("{}: casting to element type {} ({}) is not supported", n.describe(), to,
                  dtype_name(static_cast<DType>(to)));
    }
    to_ = t;
  }
  void run(KernelContext& ctx) override { cast_to(ctx, ctx.in(0), to_); }

 private:
  DType to_ = DType::Undefined;
};

void cast_like_kernel(KernelContext& ctx) {
  const Tensor& target = ctx.in(1);
  GAF_CHECK(castable(target.dtype()), "{}: cannot cast to element type {}", ctx.node().describe(),
            dtype_name(target.dtype()));
  cast_to(ctx, ctx.in(0), target.dtype());
}

}  // namespace

void register_cast_ops(KernelRegistry& r) {
  r.add("Cast").set_kernel(
      [](const Node& n) { return std::unique_ptr<Kernel>(std::make_unique<CastKernel>(n)); });
  r.add("CastLike").set_kernel(fn_kernel(cast_like_kernel));
}

}  // namespace gaf::runtime::ew
