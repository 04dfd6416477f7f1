// TensorProto <-> Tensor, including the typed repeated fields, raw_data and external data.
#include <fcntl.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gaf/onnx_io.h"

namespace gaf::onnx_io {

namespace {

int64_t external_number(const onnx::TensorProto& p, const std::string& key, const std::string& text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  GAF_CHECK(ec == std::errc() && end == text.data() + text.size() && v >= 0,
            "tensor '{}': external data '{}' is '{}', not a non-negative integer", p.name(), key, text);
  return v;
}

// ONNX's rule for external data: `location` is relative to the model's folder and stays inside it. It is resolved
// with symlinks followed, so neither "../x", an absolute path nor a link inside the folder can reach other files.
std::filesystem::path confined_location(const onnx::TensorProto& p, const std::string& location,
                                        const std::string& base_dir) {
  namespace fs = std::filesystem;
  GAF_CHECK(!base_dir.empty(),
            "tensor '{}': its data is in an external file ('{}'), but the model was given as bytes, with no folder "
            "to find it in: load the model from its file",
            p.name(), location);
  GAF_CHECK(!fs::path(location).has_root_path(),
            "tensor '{}': external data location '{}' is an absolute path; ONNX requires a path relative to the "
            "model's folder",
            p.name(), location);
  std::error_code ec;
  fs::path root = fs::canonical(base_dir, ec);
  GAF_CHECK(!ec, "tensor '{}': cannot resolve the model's folder '{}': {}", p.name(), base_dir, ec.message());
  fs::path file = fs::canonical(root / location, ec);
  GAF_CHECK(!ec, "tensor '{}': cannot open external data file '{}': {}", p.name(), (root / location).string(),
            ec.message());
  auto [r, f] = std::mismatch(root.begin(), root.end(), file.begin(), file.end());
  GAF_CHECK(r == root.end(),
            "tensor '{}': external data location '{}' resolves to '{}', outside the model's folder '{}'; ONNX "
            "requires external data files inside the model's folder",
            p.name(), location, file.string(), root.string());
  GAF_CHECK(fs::is_regular_file(file, ec), "tensor '{}': external data location '{}' is not a regular file",
            p.name(), location);
  return file;
}

}  // namespace

void check_external_data(const onnx::TensorProto& p, const std::string& base_dir) {
  if (p.data_location() != onnx::TensorProto::EXTERNAL) return;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") confined_location(p, kv.value(), base_dir);
    else if (kv.key() == "offset" || kv.key() == "length") external_number(p, kv.key(), kv.value());
  }
}

namespace {

// Where a tensor's external data lies: the file (confined to the model's folder) and the offset of `expected`
// bytes in it, checked against the file's size before any memory is taken for them.
struct ExternalSpan {
  std::filesystem::path path;
  int64_t offset = 0, length = 0;
};

ExternalSpan external_span(const onnx::TensorProto& p, const std::string& base_dir, size_t expected) {
  std::string location;
  ExternalSpan s;
  s.length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") s.offset = external_number(p, kv.key(), kv.value());
    else if (kv.key() == "length") s.length = external_number(p, kv.key(), kv.value());
  }
  GAF_CHECK(!location.empty(), "tensor '{}': external data has no location", p.name());
  s.path = confined_location(p, location, base_dir);
  if (s.length < 0) s.length = int64_t(expected);
  GAF_CHECK(uint64_t(s.length) == expected, "tensor '{}': external data length {} where its type needs {} bytes",
            p.name(), s.length, expected);
  std::error_code ec;
  uint64_t file_size = std::filesystem::file_size(s.path, ec);
  GAF_CHECK(!ec && uint64_t(s.offset) <= file_size && uint64_t(s.length) <= file_size - uint64_t(s.offset),
            "tensor '{}': external data file '{}' is truncated: {} bytes at offset {} needed, the file has {}",
            p.name(), s.path.string(), s.length, s.offset, file_size);
  return s;
}

// The span's bytes read straight into the tensor's memory (no staging copy of the weights).
void read_external(const onnx::TensorProto& p, const ExternalSpan& s, void* out) {
  std::ifstream f(s.path, std::ios::binary);
  GAF_CHECK(f, "tensor '{}': cannot open external data file '{}'", p.name(), s.path.string());
  f.seekg(s.offset);
  f.read(static_cast<char*>(out), s.length);
  GAF_CHECK(f.gcount() == s.length, "tensor '{}': external data file '{}' is truncated", p.name(),
            s.path.string());
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
  // The element count the dims declare is checked against the data the proto holds before any memory is taken:
  // dims of 10^18 elements over a few bytes of data are an error, not a huge allocation.
  int64_t n = 1;
  for (int64_t d : dims)
    GAF_CHECK(!__builtin_mul_overflow(n, d, &n), "tensor '{}': dims {} have more elements than 64 bits count",
              p.name(), dims_to_string(dims));
  if (dt == DType::String) {
    GAF_CHECK(p.string_data_size() == n, "tensor '{}': has {} strings, its dims say {}", p.name(),
              p.string_data_size(), n);
  } else if (p.data_location() != onnx::TensorProto::EXTERNAL) {
    const int64_t have = p.has_raw_data() ? int64_t(p.raw_data().size() / dtype_size(dt))
                         : dt == DType::Float   ? p.float_data_size()
                         : dt == DType::Double  ? p.double_data_size()
                         : dt == DType::Int64   ? p.int64_data_size()
                         : dt == DType::UInt32 || dt == DType::UInt64 ? p.uint64_data_size()
                                                                      : p.int32_data_size();
    GAF_CHECK(have == n, "tensor '{}': holds {} values, its dims {} say {}", p.name(), have, dims_to_string(dims), n);
  }
  const bool external = dt != DType::String && p.data_location() == onnx::TensorProto::EXTERNAL;
  ExternalSpan span;  // checked against the file before the tensor is allocated
  if (external) {
    int64_t bytes = 0;
    GAF_CHECK(!__builtin_mul_overflow(n, int64_t(dtype_size(dt)), &bytes),
              "tensor '{}': dims {} need more bytes than 64 bits count", p.name(), dims_to_string(dims));
    span = external_span(p, base_dir, size_t(bytes));
  }
  Tensor t(dt, dims, Allocator::weights());  // a weight a session keeps packed is given back when released
  if (dt == DType::String) {
    for (int64_t i = 0; i < n; ++i) t.strings()[i] = p.string_data(int(i));
    return t;
  }
  if (external) {
    if (n) read_external(p, span, t.raw());
    return t;
  }
  if (const std::string* raw = p.has_raw_data() ? &p.raw_data() : nullptr) {
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

std::string folder_of(const std::string& file_path) {
  std::string dir = std::filesystem::path(file_path).parent_path().string();
  return dir.empty() ? "." : dir;
}

Tensor load_tensor(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  GAF_CHECK(f, "cannot open tensor file '{}'", path);
  onnx::TensorProto p;
  GAF_CHECK(p.ParseFromIstream(&f), "'{}' is not a serialized ONNX TensorProto", path);
  GAF_CHECK(p.data_type() != 0, "'{}' is not a serialized ONNX TensorProto (no data type)", path);
  return tensor_from_proto(p, folder_of(path));
}

void save_tensor(const Tensor& t, const std::string& path, const std::string& name) {
  GAF_CHECK(t.is_dense(), "cannot write {} to '{}' as a tensor",
            t.is_none() ? "an empty optional" : "a sequence", path);
  onnx::TensorProto p;
  tensor_to_proto(t, p);
  if (!name.empty()) p.set_name(name);
  write_file_atomic(path, p.SerializeAsString());
}

namespace {

Tensor sequence_from_proto(const onnx::SequenceProto& p, DType declared, const std::string& path) {
  GAF_CHECK(p.elem_type() == onnx::SequenceProto::TENSOR || p.tensor_values_size() == 0,
            "'{}' holds a sequence of {}; only sequences of tensors are supported", path,
            onnx::SequenceProto::DataType_Name(p.elem_type()));
  std::vector<Tensor> items;
  for (const auto& t : p.tensor_values()) items.push_back(tensor_from_proto(t, folder_of(path)));
  const DType dtype = items.empty() ? declared : items.front().dtype();
  return Tensor::sequence(dtype, std::move(items));
}

void sequence_to_proto(const Tensor& s, onnx::SequenceProto& p) {
  p.set_elem_type(onnx::SequenceProto::TENSOR);
  for (const Tensor& t : s.items()) tensor_to_proto(t, *p.add_tensor_values());
}

}  // namespace

Tensor load_value(const std::string& path, const TensorType& type) {
  if (type.is_tensor()) return load_tensor(path);
  std::ifstream f(path, std::ios::binary);
  GAF_CHECK(f, "cannot open value file '{}'", path);
  if (type.kind == ValueKind::Sequence) {
    onnx::SequenceProto p;
    GAF_CHECK(p.ParseFromIstream(&f), "'{}' is not a serialized ONNX SequenceProto ({} expected)", path,
              type.to_string());
    return sequence_from_proto(p, type.dtype, path);
  }
  onnx::OptionalProto p;
  GAF_CHECK(p.ParseFromIstream(&f), "'{}' is not a serialized ONNX OptionalProto ({} expected)", path,
            type.to_string());
  switch (p.elem_type()) {
    case onnx::OptionalProto::UNDEFINED:
      return Tensor::none();
    case onnx::OptionalProto::TENSOR:
      GAF_CHECK(type.kind == ValueKind::Optional, "'{}' holds an optional tensor; {} expected", path,
                type.to_string());
      return tensor_from_proto(p.tensor_value(), folder_of(path));
    case onnx::OptionalProto::SEQUENCE:
      GAF_CHECK(type.kind == ValueKind::OptionalSequence, "'{}' holds an optional sequence; {} expected",
                path, type.to_string());
      return sequence_from_proto(p.sequence_value(), type.dtype, path);
    default:
      fail("'{}' holds an optional {}; only optional tensors and sequences of tensors are supported", path,
           onnx::OptionalProto::DataType_Name(p.elem_type()));
  }
}

void save_value(const Tensor& v, const TensorType& type, const std::string& path, const std::string& name) {
  if (type.is_tensor() && v.is_dense()) return save_tensor(v, path, name);
  std::string bytes;
  if (type.kind == ValueKind::Sequence || (type.is_tensor() && v.is_sequence())) {
    GAF_CHECK(v.is_sequence(), "cannot write {} to '{}' as a sequence", v.to_string(4), path);
    onnx::SequenceProto p;
    sequence_to_proto(v, p);
    if (!name.empty()) p.set_name(name);
    bytes = p.SerializeAsString();
  } else {
    onnx::OptionalProto p;
    if (!name.empty()) p.set_name(name);
    if (v.is_sequence()) {
      p.set_elem_type(onnx::OptionalProto::SEQUENCE);
      sequence_to_proto(v, *p.mutable_sequence_value());
    } else if (v.is_dense()) {
      p.set_elem_type(onnx::OptionalProto::TENSOR);
      tensor_to_proto(v, *p.mutable_tensor_value());
    }
    bytes = p.SerializeAsString();
  }
  write_file_atomic(path, bytes);
}

namespace {

// Removes `<target>.tmp<pid>` files left by a process that was killed while writing `target`.
void remove_orphaned_temporaries(const std::filesystem::path& target) {
  std::error_code ec;
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  std::string prefix = target.filename().string() + ".tmp";
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove(it->path(), ec);
  }
}

// Writes and fsyncs `bytes` to the new file `tmp`; on failure removes it and fails naming `path`.
void write_temporary(const std::filesystem::path& tmp, const std::string& path, const std::string& bytes) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GAF_CHECK(fd >= 0, "cannot write '{}': {}; check that the folder exists and is writable", path,
            std::strerror(errno));
  const char* p = bytes.data();
  size_t left = bytes.size();
  int err = 0;
  while (left > 0 && !err) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = n < 0 ? errno : ENOSPC;
    else p += n, left -= size_t(n);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    fail("writing '{}' failed: {}", path, std::strerror(err));
  }
}

}  // namespace

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  std::vector<fs::path> tmps;
  auto discard = [&] {
    std::error_code ec;
    for (const fs::path& t : tmps) fs::remove(t, ec);
  };
  try {
    for (const auto& [path, bytes] : files) {
      fs::path target(path);
      std::error_code ec;
      GAF_CHECK(!fs::is_directory(target, ec), "cannot write '{}': it is a folder; give a file name", path);
      remove_orphaned_temporaries(target);
      fs::path tmp = target;
      tmp += fmt::format(".tmp{}", ::getpid());
      write_temporary(tmp, path, bytes);
      tmps.push_back(tmp);
    }
  } catch (...) {
    discard();
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    fs::rename(tmps[i], files[i].first, ec);
    if (ec) {
      discard();
      fail("cannot write '{}': {}", files[i].first, ec.message());
    }
  }
}

void write_file_atomic(const std::string& path, const std::string& bytes) { write_files_atomic({{path, bytes}}); }

}  // namespace gaf::onnx_io
