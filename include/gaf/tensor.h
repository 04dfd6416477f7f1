// A dense tensor: element type, dims (row-major) and shared storage. Copies share storage; views (reshape) share
// it too. Storage comes from an Allocator, so the runtime can recycle buffers by liveness.
//
// A tensor is contiguous unless made by Tensor::view: a window of another tensor's storage with strides of its
// own (the session's KV cache hands out [batch, heads, length, depth] views of a buffer with room for more
// positions). Kernels read data<T>() as contiguous; the session copies a view into contiguous storage before a
// kernel that does not read strides (Kernel::reads_strided_inputs). Element accessors (get_double, set_double,
// get_int, to_string) and clone() follow the strides.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gaf/dtype.h"

namespace gaf {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns at least `bytes` bytes aligned to 64; released when the last reference goes.
  virtual std::shared_ptr<void> allocate(size_t bytes) = 0;
  static Allocator& heap();  // plain aligned heap allocation
  // For a model's weights, long-lived, large and written whole as soon as taken: from 1 MiB on, each buffer a
  // mapping of its own with its pages in place (weight_pages), whose memory goes back to the system the moment
  // it is freed (a weight a session keeps packed, Kernel::keeps_own_copy); the heap would keep it as free
  // blocks. Smaller ones from the heap.
  static Allocator& weights();
  // What weights() does for a buffer of its own, for holders that free by pointer and size (the kernels' packed
  // copies of weights): from 1 MiB on, a private mapping with its pages in place (MAP_POPULATE: one call where a
  // page faulted in by its first write costs ~10 us on a VM) that goes back to the system when freed; smaller
  // ones from the heap. Aligned to 64; free with the same size. Throws std::bad_alloc.
  static void* weight_pages(size_t bytes);
  static void free_weight_pages(void* p, size_t bytes);
  // A private mapping of its own (page-aligned; 2 MB-aligned and advised onto 2 MB pages from 2 MB on), its pages
  // in place when `populate`, else faulted in by first writes. Free with free_mapped_pages and the same size.
  // Throws std::bad_alloc.
  static void* mapped_pages(size_t bytes, bool populate);
  static void free_mapped_pages(void* p, size_t bytes);
};

int64_t numel_of(std::span<const int64_t> dims);
// Row-major element strides of dims.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims);

// A reshape of static dims `from` to `to` as runs of dims with equal products on both sides, in order: each run
// is {from_begin, from_end, to_begin, to_end} ([128,12,64] -> [128,768]: {0,1,0,1}, {1,3,1,2}). Size-1 dims
// join the run they meet; a run may be empty on one side only at the end (trailing size-1 dims). nullopt when
// the element counts differ or a dim is not positive.
std::optional<std::vector<std::array<size_t, 4>>> reshape_runs(std::span<const int64_t> from,
                                                               std::span<const int64_t> to);

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage (zeroed for String and when `zero` is set).
  Tensor(DType dtype, std::vector<int64_t> dims, Allocator& alloc = Allocator::heap(), bool zero = false);

  template <class T>
  static Tensor from(std::vector<int64_t> dims, std::span<const T> values) {
    Tensor t(DTypeOf<T>::value, std::move(dims));
    GAF_ASSERT(size_t(t.numel()) == values.size(), "Tensor::from: value count does not match dims");
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
    return t;
  }
  template <class T>
  static Tensor scalar(T v) {
    return from<T>({}, std::span<const T>(&v, 1));
  }

  // A run-time value of ONNX's non-tensor types (ValueKind): a sequence of tensors whose element type is
  // `dtype` (its items are shared with every copy and never change: SequenceInsert makes a new sequence), or
  // an empty optional. An optional that holds a value is that value. Such a value has no dims and no data of
  // its own; only the sequence and optional kernels (and If, Loop, Identity passing it on) take one.
  static Tensor sequence(DType dtype, std::vector<Tensor> items);
  static Tensor none();
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_dense() const { return kind_ == Kind::Dense && defined(); }
  const std::vector<Tensor>& items() const;  // requires is_sequence()

  bool defined() const { return dtype_ != DType::Undefined || kind_ != Kind::Dense; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i < 0 ? i + rank() : i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * dtype_size(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <class T>
  T* data() {
    GAF_ASSERT(DTypeOf<T>::value == dtype_, "Tensor::data: wrong element type");
    return static_cast<T*>(data_);
  }
  template <class T>
  const T* data() const {
    GAF_ASSERT(DTypeOf<T>::value == dtype_, "Tensor::data: wrong element type");
    return static_cast<const T*>(data_);
  }
  std::string* strings() { return static_cast<std::string*>(data_); }
  const std::string* strings() const { return static_cast<const std::string*>(data_); }

  // Tensors sharing this one's storage, itself included (0 for an undefined tensor): 1 means no other view.
  long storage_use_count() const { return storage_.use_count(); }

  // Same storage, new dims (element count must match; a strided view must be made contiguous first).
  Tensor reshaped(std::vector<int64_t> dims) const;
  // A window of `base`'s storage: `dims` with element `strides`, starting `offset` elements into base's data.
  // Every element must lie within base's elements (checked). Contiguous strides give a contiguous tensor.
  static Tensor view(const Tensor& base, std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t offset = 0);
  // A contiguous tensor over memory the caller owns (I/O binding: inputs read and outputs written in place, no
  // copy). `owner` is kept alive with the tensor and its copies; with none, the caller keeps `data` valid while
  // any copy lives. Any alignment (the CPU kernels load unaligned); not String.
  static Tensor wrap(DType dtype, std::vector<int64_t> dims, void* data, std::shared_ptr<void> owner = nullptr);
  // A type and dims without data (raw() is null): a weight whose session keeps it in a form of its own leaves
  // this in the graph it owns (runtime::Session(std::unique_ptr<Graph>)). Not String.
  static Tensor without_data(DType dtype, std::vector<int64_t> dims);
  bool has_data() const { return data_ != nullptr || numel_ == 0 || kind_ != Kind::Dense; }
  bool is_contiguous() const { return strides_.empty(); }
  // Element strides: the view's own, or the row-major strides of dims.
  std::vector<int64_t> strides() const;
  // Element i (row-major logical index) as an offset from data<T>(): i itself for a contiguous tensor.
  int64_t offset_of(int64_t i) const;
  // Same storage and dims, element type reinterpreted (sizes must match): bfloat16 <-> uint16 bits.
  Tensor bitcast(DType dtype) const;
  // Deep copy into fresh contiguous storage (a view is gathered).
  Tensor clone(Allocator& alloc = Allocator::heap()) const;
  // This tensor when contiguous, else clone(alloc).
  Tensor contiguous(Allocator& alloc = Allocator::heap()) const { return is_contiguous() ? *this : clone(alloc); }
  // Copies src's elements into this tensor's (same dtype and dims; either may be a view; not String).
  void copy_from(const Tensor& src);
  // Element i converted to double / int64 (any numeric dtype); for attributes and shape inputs.
  double get_double(int64_t i) const;
  // Sets element i to v converted to the tensor's numeric dtype (rounded once).
  void set_double(int64_t i, double v);
  int64_t get_int(int64_t i) const;
  std::vector<int64_t> to_int_vector() const;

  std::string to_string(size_t max_elems = 16) const;  // "float[2,3] {1, 2, ...}", "seq(float) [...]", "none"

 private:
  enum class Kind : uint8_t { Dense, Sequence, None };
  Kind kind_ = Kind::Dense;
  std::shared_ptr<const std::vector<Tensor>> items_;  // a sequence's
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;  // empty: contiguous
  int64_t numel_ = 0;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
};

std::string dims_to_string(std::span<const int64_t> dims);

}  // namespace gaf
