// TensorProto <-> Tensor, including the typed repeated fields, raw_data and external data.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "gaf/onnx_io.h"

namespace gaf::onnx_io {

namespace {

std::string read_external(const onnx::TensorProto& p, const std::string& base_dir, size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  GAF_CHECK(!location.empty(), "tensor '{}': external data has no location", p.name());
  std::filesystem::path path = std::filesystem::path(base_dir) / location;
  std::ifstream f(path, std::ios::binary);
  GAF_CHECK(f, "tensor '{}': cannot open external data file '{}'", p.name(), path.string());
  if (length < 0) length = int64_t(expected);
  std::string bytes(size_t(length), '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  GAF_CHECK(f.gcount() == length, "tensor '{}': external data file '{}' is truncated", p.name(), path.string());
  return bytes;
}

template <class Src, class T>
void copy_field(const Src& field, T* out, int64_t n, const std::string& name) {
  GAF_CHECK(int64_t(field.size()) == n, "tensor '{}': has {} values, its dims say {}", name, field.size(), n);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(field[int(i)]);
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir) {
  DType dt = static_cast<DType>(p.data_type());
  GAF_CHECK(dtype_size(dt) > 0, "tensor '{}': unknown data type {}", p.name(), p.data_type());
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  for (int64_t d : dims) GAF_CHECK(d >= 0, "tensor '{}': negative dimension", p.name());
  Tensor t(dt, dims);
  int64_t n = t.numel();
  if (dt == DType::String) {
    GAF_CHECK(p.string_data_size() == n, "tensor '{}': has {} strings, its dims say {}", p.name(),
              p.string_data_size(), n);
    for (int64_t i = 0; i < n; ++i) t.strings()[i] = p.string_data(int(i));
    return t;
  }
  const std::string* raw = nullptr;
  std::string external;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    external = read_external(p, base_dir, t.nbytes());
    raw = &external;
  } else if (p.has_raw_data()) {
    raw = &p.raw_data();
  }
  if (raw) {
    GAF_CHECK(raw->size() == t.nbytes(), "tensor '{}': raw data has {} bytes, {} expected for {}{}", p.name(),
              raw->size(), t.nbytes(), dtype_name(dt), dims_to_string(dims));
    if (n) std::memcpy(t.raw(), raw->data(), raw->size());
    return t;
  }
  switch (dt) {
    case DType::Float: copy_field(p.float_data(), t.data<float>(), n, p.name()); break;
    case DType::Double: copy_field(p.double_data(), t.data<double>(), n, p.name()); break;
    case DType::Int64: copy_field(p.int64_data(), t.data<int64_t>(), n, p.name()); break;
    case DType::UInt32: copy_field(p.uint64_data(), t.data<uint32_t>(), n, p.name()); break;
    case DType::UInt64: copy_field(p.uint64_data(), t.data<uint64_t>(), n, p.name()); break;
    case DType::Int32: copy_field(p.int32_data(), t.data<int32_t>(), n, p.name()); break;
    case DType::Int16: copy_field(p.int32_data(), t.data<int16_t>(), n, p.name()); break;
    case DType::UInt16: copy_field(p.int32_data(), t.data<uint16_t>(), n, p.name()); break;
    case DType::Int8: copy_field(p.int32_data(), t.data<int8_t>(), n, p.name()); break;
    case DType::UInt8: copy_field(p.int32_data(), t.data<uint8_t>(), n, p.name()); break;
    case DType::Bool: copy_field(p.int32_data(), t.data<bool>(), n, p.name()); break;
    case DType::Float16:
    case DType::BFloat16: copy_field(p.int32_data(), static_cast<uint16_t*>(t.raw()), n, p.name()); break;
    default: unsupported("tensor '{}': data type {} is not supported", p.name(), dtype_name(dt));
  }
  return t;
}

void tensor_to_proto(const Tensor& t, onnx::TensorProto& p) {
  p.set_data_type(static_cast<int32_t>(t.dtype()));
  p.clear_dims();
  for (int64_t d : t.dims()) p.add_dims(d);
  if (t.dtype() == DType::String) {
    for (int64_t i = 0; i < t.numel(); ++i) p.add_string_data(t.strings()[i]);
  } else {
    p.set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
  }
}

Tensor load_tensor(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  GAF_CHECK(f, "cannot open tensor file '{}'", path);
  onnx::TensorProto p;
  GAF_CHECK(p.ParseFromIstream(&f), "'{}' is not a serialized ONNX TensorProto", path);
  GAF_CHECK(p.data_type() != 0, "'{}' is not a serialized ONNX TensorProto (no data type)", path);
  return tensor_from_proto(p, std::filesystem::path(path).parent_path().string());
}

void save_tensor(const Tensor& t, const std::string& path, const std::string& name) {
  onnx::TensorProto p;
  tensor_to_proto(t, p);
  if (!name.empty()) p.set_name(name);
  write_file_atomic(path, p.SerializeAsString());
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  std::filesystem::path target(path);
  std::filesystem::path tmp = target;
  tmp += fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    GAF_CHECK(f, "cannot write '{}': check that the folder exists and is writable", path);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    f.close();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      fail("writing '{}' failed (disk full?)", path);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail("cannot write '{}': {}", path, ec.message());
  }
}

}  // namespace gaf::onnx_io
