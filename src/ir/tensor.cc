#include "gaf/tensor.h"

#include <cstdlib>
#include <new>
#include <sstream>

namespace gaf {

namespace {
class HeapAllocator final : public Allocator {
 public:
  std::shared_ptr<void> allocate(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!p) throw std::bad_alloc();
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
};
}  // namespace

Allocator& Allocator::heap() {
  static HeapAllocator heap;
  return heap;
}

int64_t numel_of(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::optional<std::vector<std::array<size_t, 4>>> reshape_runs(std::span<const int64_t> from,
                                                               std::span<const int64_t> to) {
  for (auto dims : {from, to})
    for (int64_t d : dims)
      if (d <= 0) return std::nullopt;
  std::vector<std::array<size_t, 4>> runs;
  size_t a = 0, c = 0;
  while (a < from.size() || c < to.size()) {
    size_t b = a, e = c;
    int64_t pf = 1, pt = 1;
    if (b < from.size()) pf *= from[b++];
    if (e < to.size()) pt *= to[e++];
    while (pf != pt) {
      if (pf < pt && b < from.size()) pf *= from[b++];
      else if (pt < pf && e < to.size()) pt *= to[e++];
      else return std::nullopt;
    }
    runs.push_back({a, b, c, e});
    a = b, c = e;
  }
  return runs;
}

std::string dims_to_string(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims, Allocator& alloc, bool zero)
    : dtype_(dtype), dims_(std::move(dims)) {
  // Checked: a shape read from a model or computed from its data (Expand, ConstantOfShape, Tile...) whose element
  // or byte count overflows 64 bits would otherwise allocate a small buffer and be written far past it.
  int64_t n = 1, bytes = 0;
  for (int64_t d : dims_) {
    GAF_CHECK(d >= 0, "negative dimension in tensor shape {}", dims_to_string(dims_));
    GAF_CHECK(!__builtin_mul_overflow(n, d, &n),
              "tensor shape {} has more elements than 64 bits count: the model asks for an impossible size",
              dims_to_string(dims_));
  }
  GAF_CHECK(dtype == DType::String || !__builtin_mul_overflow(n, int64_t(dtype_size(dtype)), &bytes),
            "tensor shape {} of {} needs more bytes than 64 bits count: the model asks for an impossible size",
            dims_to_string(dims_), dtype_name(dtype));
  numel_ = n;
  if (dtype == DType::String) {
    auto* arr = new std::string[std::max<int64_t>(numel_, 1)];
    storage_ = std::shared_ptr<void>(arr, [](void* p) { delete[] static_cast<std::string*>(p); });
  } else {
    storage_ = alloc.allocate(nbytes());
    if (zero) std::memset(storage_.get(), 0, nbytes());
  }
  data_ = storage_.get();
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  GAF_CHECK(numel_of(dims) == numel_, "cannot reshape {} elements to {}", numel_, dims_to_string(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::bitcast(DType dtype) const {
  GAF_CHECK(dtype_size(dtype) == dtype_size(dtype_) && dtype != DType::String && dtype_ != DType::String,
            "cannot reinterpret {} as {}", dtype_name(dtype_), dtype_name(dtype));
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::clone(Allocator& alloc) const {
  Tensor t(dtype_, dims_, alloc);
  if (dtype_ == DType::String) {
    for (int64_t i = 0; i < numel_; ++i) t.strings()[i] = strings()[i];
  } else if (numel_ > 0) {
    std::memcpy(t.raw(), raw(), nbytes());
  }
  return t;
}

double Tensor::get_double(int64_t i) const {
  return visit_dtype(dtype_, [&](auto tag) -> double {
    using T = decltype(tag);
    return to_double(static_cast<const T*>(data_)[i]);
  });
}

void Tensor::set_double(int64_t i, double v) {
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(data_)[i] = from_double<T>(v);
  });
}

int64_t Tensor::get_int(int64_t i) const {
  return visit_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return static_cast<int64_t>(to_double(static_cast<const T*>(data_)[i]));
    } else {
      return static_cast<int64_t>(static_cast<const T*>(data_)[i]);
    }
  });
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> v(numel_);
  for (int64_t i = 0; i < numel_; ++i) v[i] = get_int(i);
  return v;
}

std::string Tensor::to_string(size_t max_elems) const {
  std::ostringstream os;
  os << dtype_name(dtype_) << dims_to_string(dims_) << " {";
  size_t n = std::min<size_t>(numel_, max_elems);
  for (size_t i = 0; i < n; ++i) {
    if (i) os << ", ";
    if (dtype_ == DType::String) os << '"' << strings()[i] << '"';
    else os << get_double(i);
  }
  if (size_t(numel_) > n) os << ", ...";
  os << "}";
  return os.str();
}

}  // namespace gaf
