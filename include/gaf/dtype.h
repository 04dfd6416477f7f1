// Element types. Numeric values equal ONNX TensorProto.DataType so conversion is a cast.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "gaf/status.h"

namespace gaf {

enum class DType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
};

size_t dtype_size(DType t);  // bytes per element; String counts as sizeof(std::string)
std::string_view dtype_name(DType t);
bool is_floating(DType t);  // Float, Double, Float16, BFloat16
bool is_integer(DType t);   // signed or unsigned integers (not Bool)
bool is_signed(DType t);

// 16-bit float storage types; arithmetic happens in fp32.
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return uint16_t(u >> 16);
}

template <class T>
struct DTypeOf;
#define GAF_DTYPE_OF(T, D) \
  template <>              \
  struct DTypeOf<T> {      \
    static constexpr DType value = D; \
  };
GAF_DTYPE_OF(float, DType::Float)
GAF_DTYPE_OF(double, DType::Double)
GAF_DTYPE_OF(uint8_t, DType::UInt8)
GAF_DTYPE_OF(int8_t, DType::Int8)
GAF_DTYPE_OF(uint16_t, DType::UInt16)
GAF_DTYPE_OF(int16_t, DType::Int16)
GAF_DTYPE_OF(int32_t, DType::Int32)
GAF_DTYPE_OF(int64_t, DType::Int64)
GAF_DTYPE_OF(uint32_t, DType::UInt32)
GAF_DTYPE_OF(uint64_t, DType::UInt64)
GAF_DTYPE_OF(bool, DType::Bool)
GAF_DTYPE_OF(Half, DType::Float16)
GAF_DTYPE_OF(BFloat16, DType::BFloat16)
#undef GAF_DTYPE_OF

// Calls f(T{}) with a value of the C++ type of `t`. Covers every numeric type and Bool; String throws.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Float: return f(float{});
    case DType::Double: return f(double{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::UInt16: return f(uint16_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::UInt32: return f(uint32_t{});
    case DType::UInt64: return f(uint64_t{});
    case DType::Bool: return f(bool{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::String:
    case DType::Undefined: break;
  }
  unsupported("element type {} is not supported here", dtype_name(t));
}

// Scalar conversion through the compute type: 16-bit floats go through fp32.
template <class T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, Half>) return half_to_float(v.bits);
  else if constexpr (std::is_same_v<T, BFloat16>) return bf16_to_float(v.bits);
  else return static_cast<double>(v);
}
template <class T>
inline T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) return Half{float_to_half(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{float_to_bf16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else return static_cast<T>(v);
}

}  // namespace gaf
