#include "gaf/tensor.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <sstream>

namespace gaf {

namespace {
constexpr size_t kMapFrom = size_t(1) << 20;
constexpr size_t kHugePage = size_t(2) << 20;
size_t page_length(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

void* aligned_heap(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

class HeapAllocator final : public Allocator {
 public:
  std::shared_ptr<void> allocate(size_t bytes) override {
    return std::shared_ptr<void>(aligned_heap(bytes), [](void* q) { std::free(q); });
  }
};
class WeightsAllocator final : public Allocator {
 public:
  std::shared_ptr<void> allocate(size_t bytes) override {
    return std::shared_ptr<void>(weight_pages(bytes), [bytes](void* q) { free_weight_pages(q, bytes); });
  }
};
}  // namespace

void* Allocator::mapped_pages(size_t bytes, bool populate) {
  const size_t length = page_length(bytes);
  if (length >= kHugePage) {
    // On 2 MB pages where the kernel gives them (transparent huge pages in "madvise" mode): a product streams its
    // weights once per token, and on 4 KB pages each 4 KB is a TLB miss and the end of the prefetcher's run.
    // The mapping is taken 2 MB longer, cut to a 2 MB boundary, advised, then populated.
    const size_t span = length + kHugePage;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
    if (start > base) munmap(raw, start - base);
    if (const size_t tail = base + span - (start + length); tail > 0) munmap(reinterpret_cast<void*>(start + length), tail);
    void* p = reinterpret_cast<void*>(start);
    madvise(p, length, MADV_HUGEPAGE);  // no effect where transparent huge pages are off
    if (populate && madvise(p, length, MADV_POPULATE_WRITE) != 0) {
      if (errno != EINVAL) {  // out of memory
        munmap(p, length);
        throw std::bad_alloc();
      }
      for (size_t at = 0; at < length; at += 4096) static_cast<volatile char*>(p)[at] = 0;  // Linux < 5.14
    }
    return p;
  }
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0),
                 -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void Allocator::free_mapped_pages(void* p, size_t bytes) {
  if (p) munmap(p, page_length(bytes));
}

void* Allocator::weight_pages(size_t bytes) { return bytes < kMapFrom ? aligned_heap(bytes) : mapped_pages(bytes, true); }

void Allocator::free_weight_pages(void* p, size_t bytes) {
  if (bytes < kMapFrom)
    std::free(p);
  else
    free_mapped_pages(p, bytes);
}

Allocator& Allocator::heap() {
  static HeapAllocator heap;
  return heap;
}

Allocator& Allocator::weights() {
  static WeightsAllocator weights;
  return weights;
}

int64_t numel_of(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; --i) s[size_t(i)] = s[size_t(i) + 1] * dims[size_t(i) + 1];
  return s;
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
  GAF_CHECK(is_contiguous(), "cannot reshape a strided view {} to {}: make it contiguous first",
            dims_to_string(dims_), dims_to_string(dims));
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

Tensor Tensor::view(const Tensor& base, std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t offset) {
  GAF_CHECK(base.defined() && base.dtype_ != DType::String, "Tensor::view: the base is {}",
            base.defined() ? "a string tensor" : "undefined");
  GAF_CHECK(dims.size() == strides.size(), "Tensor::view: {} dims but {} strides", dims.size(), strides.size());
  Tensor t;
  t.dtype_ = base.dtype_;
  t.storage_ = base.storage_;
  t.numel_ = 1;
  int64_t lo = offset, hi = offset;  // the lowest and highest element the view reaches
  for (size_t i = 0; i < dims.size(); ++i) {
    GAF_CHECK(dims[i] >= 0, "Tensor::view: negative dimension in {}", dims_to_string(dims));
    t.numel_ *= dims[i];
    if (dims[i] == 0) continue;
    (strides[i] < 0 ? lo : hi) += (dims[i] - 1) * strides[i];
  }
  GAF_CHECK(t.numel_ == 0 || (lo >= 0 && hi < base.numel_ && base.is_contiguous()),
            "Tensor::view: {} with strides {} at offset {} reaches outside the {} elements of its base",
            dims_to_string(dims), dims_to_string(strides), offset, base.numel_);
  t.data_ = static_cast<char*>(base.data_) + offset * int64_t(dtype_size(base.dtype_));
  t.dims_ = std::move(dims);
  if (strides != contiguous_strides(t.dims_)) t.strides_ = std::move(strides);
  return t;
}

Tensor Tensor::without_data(DType dtype, std::vector<int64_t> dims) {
  char probe = 0;
  Tensor t = wrap(dtype, std::move(dims), &probe);  // the dims checked as for any tensor
  t.storage_.reset();
  t.data_ = nullptr;
  return t;
}

Tensor Tensor::wrap(DType dtype, std::vector<int64_t> dims, void* data, std::shared_ptr<void> owner) {
  GAF_CHECK(dtype != DType::String && dtype != DType::Undefined, "Tensor::wrap: {} memory cannot be wrapped",
            dtype_name(dtype));
  Tensor t;
  t.dtype_ = dtype;
  t.numel_ = 1;
  for (int64_t d : dims) {
    GAF_CHECK(d >= 0 && !__builtin_mul_overflow(t.numel_, d, &t.numel_), "Tensor::wrap: bad shape {}",
              dims_to_string(dims));
  }
  GAF_CHECK(data || t.numel_ == 0, "Tensor::wrap: no memory for {} elements", t.numel_);
  t.dims_ = std::move(dims);
  t.storage_ = std::shared_ptr<void>(std::move(owner), data);  // owner's lifetime, data's address
  t.data_ = data;
  return t;
}

std::vector<int64_t> Tensor::strides() const { return strides_.empty() ? contiguous_strides(dims_) : strides_; }

int64_t Tensor::offset_of(int64_t i) const {
  if (strides_.empty()) return i;
  int64_t off = 0;
  for (int d = rank() - 1; d >= 0; --d) {
    const int64_t n = dims_[size_t(d)];
    off += (i % n) * strides_[size_t(d)];
    i /= n;
  }
  return off;
}

void Tensor::copy_from(const Tensor& src) {
  GAF_CHECK(src.dtype_ == dtype_ && src.dims_ == dims_ && dtype_ != DType::String,
            "Tensor::copy_from: {} {} into {} {}", dtype_name(src.dtype_), dims_to_string(src.dims_),
            dtype_name(dtype_), dims_to_string(dims_));
  if (numel_ == 0) return;
  const size_t es = dtype_size(dtype_);
  if (is_contiguous() && src.is_contiguous()) {
    std::memcpy(data_, src.data_, nbytes());
    return;
  }
  // Rows of the innermost dim: one memcpy each where both sides are contiguous along it.
  const std::vector<int64_t> ds = strides(), ss = src.strides();
  const int r = rank();
  const int64_t inner = r ? dims_.back() : 1;
  const bool rows = r && ds.back() == 1 && ss.back() == 1;
  for (int64_t outer = 0; outer < numel_ / std::max<int64_t>(inner, 1); ++outer) {
    int64_t doff = 0, soff = 0, k = outer;
    for (int d = r - 2; d >= 0; --d) {
      const int64_t idx = k % dims_[size_t(d)];
      k /= dims_[size_t(d)];
      doff += idx * ds[size_t(d)];
      soff += idx * ss[size_t(d)];
    }
    char* dst = static_cast<char*>(data_) + doff * int64_t(es);
    const char* from = static_cast<const char*>(src.data_) + soff * int64_t(es);
    if (rows) {
      std::memcpy(dst, from, size_t(inner) * es);
    } else {
      const int64_t dstep = r ? ds.back() : 0, sstep = r ? ss.back() : 0;
      for (int64_t j = 0; j < inner; ++j) std::memcpy(dst + j * dstep * int64_t(es), from + j * sstep * int64_t(es), es);
    }
  }
}

Tensor Tensor::sequence(DType dtype, std::vector<Tensor> items) {
  for (const Tensor& t : items)
    GAF_CHECK(t.is_dense() && t.dtype() == dtype, "a sequence of {} cannot hold {}", dtype_name(dtype),
              t.is_dense() ? dtype_name(t.dtype()) : std::string_view("a sequence or an empty optional"));
  Tensor s;
  s.kind_ = Kind::Sequence;
  s.dtype_ = dtype;
  s.items_ = std::make_shared<const std::vector<Tensor>>(std::move(items));
  return s;
}

Tensor Tensor::none() {
  Tensor t;
  t.kind_ = Kind::None;
  return t;
}

const std::vector<Tensor>& Tensor::items() const {
  GAF_ASSERT(is_sequence(), "Tensor::items on a value that is not a sequence");
  return *items_;
}

Tensor Tensor::clone(Allocator& alloc) const {
  if (kind_ != Kind::Dense) {
    if (is_none()) return *this;
    std::vector<Tensor> copies;
    for (const Tensor& t : *items_) copies.push_back(t.clone(alloc));
    return sequence(dtype_, std::move(copies));
  }
  Tensor t(dtype_, dims_, alloc);
  if (dtype_ == DType::String) {
    for (int64_t i = 0; i < numel_; ++i) t.strings()[i] = strings()[i];
  } else if (numel_ > 0) {
    t.copy_from(*this);
  }
  return t;
}

double Tensor::get_double(int64_t i) const {
  return visit_dtype(dtype_, [&](auto tag) -> double {
    using T = decltype(tag);
    return to_double(static_cast<const T*>(data_)[offset_of(i)]);
  });
}

void Tensor::set_double(int64_t i, double v) {
  visit_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(data_)[offset_of(i)] = from_double<T>(v);
  });
}

int64_t Tensor::get_int(int64_t i) const {
  return visit_dtype(dtype_, [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return static_cast<int64_t>(to_double(static_cast<const T*>(data_)[offset_of(i)]));
    } else {
      return static_cast<int64_t>(static_cast<const T*>(data_)[offset_of(i)]);
    }
  });
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> v(numel_);
  for (int64_t i = 0; i < numel_; ++i) v[i] = get_int(i);
  return v;
}

std::string Tensor::to_string(size_t max_elems) const {
  if (is_none()) return "none";
  std::ostringstream os;
  if (is_sequence()) {
    os << "seq(" << dtype_name(dtype_) << ") [";
    for (size_t i = 0; i < items_->size(); ++i) os << (i ? ", " : "") << (*items_)[i].to_string(max_elems);
    os << "]";
    return os.str();
  }
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
