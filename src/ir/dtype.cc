#include "gaf/dtype.h"
#include "gaf/status.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace gaf {

void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "graph-autofusion internal error: %s:%d: %s (%s)\n", file, line, msg.c_str(), cond);
  std::abort();
}

std::string library_message(const std::exception& e) {
  std::string_view text = e.what();
  if (text.starts_with('[')) {
    const size_t close = text.find("] ");
    if (close != std::string_view::npos && text.substr(0, close).find(' ') == std::string_view::npos)
      text.remove_prefix(close + 2);
  }
  return std::string(text);
}

std::string closest_name(const std::string& want, const std::vector<std::string>& names) {
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string a = lower(want);
  std::string best;
  size_t best_d = std::string::npos;
  std::vector<size_t> row;
  for (const std::string& name : names) {
    const std::string b = lower(name);
    row.resize(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    if (row[b.size()] < best_d) best_d = row[b.size()], best = name;
  }
  // A typo changes a few letters: at most a third of the name, and never all of a short one.
  return best_d <= std::max<size_t>(1, want.size() / 3) ? best : "";
}

std::string did_you_mean(const std::string& want, const std::vector<std::string>& names) {
  std::string c = closest_name(want, names);
  return c.empty() ? "" : fmt::format(" (did you mean '{}'?)", c);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float: return 4;
    case DType::UInt8: return 1;
    case DType::Int8: return 1;
    case DType::UInt16: return 2;
    case DType::Int16: return 2;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::String: return sizeof(std::string);
    case DType::Bool: return 1;
    case DType::Float16: return 2;
    case DType::Double: return 8;
    case DType::UInt32: return 4;
    case DType::UInt64: return 8;
    case DType::BFloat16: return 2;
    case DType::Undefined: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float: return "float";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Double: return "double";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::BFloat16: return "bfloat16";
    case DType::Undefined: return "undefined";
  }
  return "invalid";
}

bool is_floating(DType t) {
  return t == DType::Float || t == DType::Double || t == DType::Float16 || t == DType::BFloat16;
}

bool is_integer(DType t) {
  switch (t) {
    case DType::UInt8: case DType::Int8: case DType::UInt16: case DType::Int16: case DType::Int32:
    case DType::Int64: case DType::UInt32: case DType::UInt64: return true;
    default: return false;
  }
}

bool is_signed(DType t) {
  return t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64 || is_floating(t);
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | (exp + 112) << 23 | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return uint16_t(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow to inf
  if (absx < 0x38800000u) {                                // subnormal or zero in half
    if (absx < 0x33000000u) return uint16_t(sign);
    uint32_t e = absx >> 23;
    uint32_t mant = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;  // 14 - (e - 127) + 13 - 1 ... bits to drop
    uint32_t half_mant = mant >> (shift);
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return uint16_t(sign | half_mant);
  }
  uint32_t e = (absx >> 23) - 112;
  uint32_t mant = absx & 0x7fffff;
  uint32_t h = (e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

}  // namespace gaf
