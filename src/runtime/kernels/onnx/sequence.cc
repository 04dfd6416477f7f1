// Sequences and optionals (ValueKind::Sequence, Optional, OptionalSequence): a sequence is a Tensor holding a
// shared, unchanging list of tensors (Tensor::sequence), so SequenceAt hands out an item without a copy and
// SequenceInsert / SequenceErase make a new list of the same items; an empty optional is Tensor::none(), and
// an optional holding a value is that value. SequenceMap runs its body with If, Loop and Scan
// (control_flow.cc).
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

const Tensor& sequence_input(const KernelContext& ctx, int i) {
  const Tensor& s = ctx.in(i);
  GAF_CHECK(s.is_sequence(), "{}: input {} must be a sequence; it is {}", ctx.node().describe(), i,
            s.is_none() ? "an empty optional" : "a tensor");
  return s;
}

const Tensor& tensor_input(const KernelContext& ctx, int i) {
  const Tensor& t = ctx.in(i);
  GAF_CHECK(t.is_dense(), "{}: input {} must be a tensor; it is {}", ctx.node().describe(), i,
            t.is_none() ? "an empty optional" : "a sequence");
  return t;
}

// The position input `i` of a sequence of `size` items, counted from the end when negative; valid positions
// are [-size, size - 1], or [-size, size] where `may_be_end` (an insertion after the last item).
size_t position(const KernelContext& ctx, int i, size_t size, bool may_be_end) {
  const Tensor& p = tensor_input(ctx, i);
  GAF_CHECK(p.numel() == 1 && (p.dtype() == DType::Int64 || p.dtype() == DType::Int32),
            "{}: the position is {}{}; it must be one int32 or int64", ctx.node().describe(),
            dtype_name(p.dtype()), dims_to_string(p.dims()));
  const int64_t n = int64_t(size), at = p.get_int(0);
  const int64_t last = may_be_end ? n : n - 1;
  GAF_CHECK(at >= -n && at <= last, "{}: position {} is outside [{}, {}] for a sequence of {} tensors",
            ctx.node().describe(), at, -n, last, n);
  return size_t(at < 0 ? at + n : at);
}

void sequence_empty_kernel(KernelContext& ctx) {
  const DType dtype = DType(ctx.node().attr_int("dtype", int64_t(DType::Float)));
  ctx.set_output(0, Tensor::sequence(dtype, {}));
}

void sequence_construct_kernel(KernelContext& ctx) {
  std::vector<Tensor> items;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    items.push_back(tensor_input(ctx, i));
    GAF_CHECK(items.back().dtype() == items.front().dtype(),
              "{}: input {} is {}, input 0 is {}; a sequence holds "
              "tensors of one element type",
              ctx.node().describe(), i, dtype_name(items.back().dtype()), dtype_name(items.front().dtype()));
  }
  GAF_CHECK(!items.empty(), "{}: needs at least one tensor", ctx.node().describe());
  const DType dtype = items.front().dtype();
  ctx.set_output(0, Tensor::sequence(dtype, std::move(items)));
}

void sequence_at_kernel(KernelContext& ctx) {
  const auto& items = sequence_input(ctx, 0).items();
  ctx.set_output(0, items[position(ctx, 1, items.size(), false)]);
}

void sequence_insert_kernel(KernelContext& ctx) {
  const Tensor& s = sequence_input(ctx, 0);
  const Tensor& t = tensor_input(ctx, 1);
  GAF_CHECK(t.dtype() == s.dtype(), "{}: cannot insert a tensor of {} into a sequence of {}",
            ctx.node().describe(), dtype_name(t.dtype()), dtype_name(s.dtype()));
  std::vector<Tensor> items = s.items();
  const size_t at = ctx.input(2) ? position(ctx, 2, items.size(), true) : items.size();
  items.insert(items.begin() + std::ptrdiff_t(at), t);
  ctx.set_output(0, Tensor::sequence(s.dtype(), std::move(items)));
}

void sequence_erase_kernel(KernelContext& ctx) {
  const Tensor& s = sequence_input(ctx, 0);
  std::vector<Tensor> items = s.items();
  GAF_CHECK(!items.empty(), "{}: cannot erase from an empty sequence", ctx.node().describe());
  const size_t at = ctx.input(1) ? position(ctx, 1, items.size(), false) : items.size() - 1;
  items.erase(items.begin() + std::ptrdiff_t(at));
  ctx.set_output(0, Tensor::sequence(s.dtype(), std::move(items)));
}

void sequence_length_kernel(KernelContext& ctx) {
  const int64_t n = int64_t(sequence_input(ctx, 0).items().size());
  ctx.allocate_output(0, DType::Int64, {}).data<int64_t>()[0] = n;
}

// SplitToSequence(input, split?): with no split, pieces of 1 along axis (squeezed unless keepdims); with a
// scalar split, pieces of that length (the last one shorter when it does not divide); with a 1-D split, those
// lengths.
void split_to_sequence_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = tensor_input(ctx, 0);
  GAF_CHECK(x.rank() > 0, "{}: cannot split a scalar", n.describe());
  const int axis = normalize_axis(n.attr_int("axis", 0), x.rank(), n);
  const int64_t dim = x.dim(axis);
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (const Tensor* split = ctx.input(1)) {
    std::vector<int64_t> given = read_ints(*split, n, "split");
    if (split->rank() == 0) {
      GAF_CHECK(given[0] > 0, "{}: split is {}; a piece length must be positive", n.describe(), given[0]);
      for (int64_t at = 0; at < dim; at += given[0]) sizes.push_back(std::min(given[0], dim - at));
    } else {
      check_split_lengths(given, dim, axis, n);
      sizes = std::move(given);
    }
  } else {
    sizes.assign(size_t(dim), 1);
    squeeze = n.attr_int("keepdims", 1) == 0;
  }
  std::vector<Tensor> items;
  std::vector<Tensor*> parts;
  items.reserve(sizes.size());
  for (int64_t s : sizes) {
    std::vector<int64_t> dims = x.dims();
    dims[size_t(axis)] = s;
    items.emplace_back(x.dtype(), dims, ctx.allocator());
    parts.push_back(&items.back());
  }
  split_into(x, parts, axis);
  if (squeeze)
    for (Tensor& t : items) {
      std::vector<int64_t> dims = t.dims();
      dims.erase(dims.begin() + axis);
      t = t.reshaped(dims);
    }
  ctx.set_output(0, Tensor::sequence(x.dtype(), std::move(items)));
}

// ConcatFromSequence: the items joined along axis, or stacked along a new axis (new_axis = 1).
void concat_from_sequence_kernel(KernelContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& s = sequence_input(ctx, 0);
  const auto& items = s.items();
  GAF_CHECK(!items.empty(), "{}: cannot concatenate an empty sequence (its result has no shape)",
            n.describe());
  GAF_CHECK(n.has_attr("axis"), "{}: the axis attribute is missing", n.describe());
  const bool stack = n.attr_int("new_axis", 0) != 0;
  const Tensor& first = items.front();
  const int rank = first.rank() + (stack ? 1 : 0);
  GAF_CHECK(rank > 0, "{}: cannot concatenate scalars; set new_axis to stack them", n.describe());
  const int axis = normalize_axis(n.attr_int("axis"), rank, n);
  std::vector<Tensor> parts;
  std::vector<int64_t> out_dims;
  for (size_t i = 0; i < items.size(); ++i) {
    Tensor t = items[i];
    if (stack) {
      std::vector<int64_t> dims = t.dims();
      dims.insert(dims.begin() + axis, 1);
      t = t.contiguous(ctx.allocator()).reshaped(dims);
    }
    if (i == 0) {
      out_dims = t.dims();
      out_dims[size_t(axis)] = 0;
    }
    bool ok = t.rank() == rank;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || t.dim(d) == out_dims[size_t(d)];
    GAF_CHECK(ok, "{}: item {} is {}, which does not match item 0 {} outside axis {}", n.describe(), i,
              dims_to_string(items[i].dims()), dims_to_string(first.dims()), axis);
    out_dims[size_t(axis)] += t.dim(axis);
    parts.push_back(std::move(t));
  }
  std::vector<const Tensor*> ptrs;
  for (Tensor& t : parts) {
    t = t.contiguous(ctx.allocator());
    ptrs.push_back(&t);
  }
  concat_into(ctx.allocate_output(0, s.dtype(), out_dims), ptrs, axis);
}

void optional_kernel(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  ctx.set_output(0, x ? *x : Tensor::none());
}

void optional_has_element_kernel(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  ctx.allocate_output(0, DType::Bool, {}).data<bool>()[0] = x && !x->is_none();
}

void optional_get_element_kernel(KernelContext& ctx) {
  const Tensor* x = ctx.input(0);
  GAF_CHECK(x && !x->is_none(), "{}: the optional is empty; test it with OptionalHasElement first",
            ctx.node().describe());
  ctx.set_output(0, *x);
}

}  // namespace

void register_sequence_ops(KernelRegistry& r) {
  r.add("SequenceEmpty").set_kernel(fn_kernel(sequence_empty_kernel));
  r.add("SequenceConstruct").set_kernel(fn_kernel(sequence_construct_kernel));
  r.add("SequenceAt").set_kernel(fn_kernel(sequence_at_kernel));
  r.add("SequenceInsert").set_kernel(fn_kernel(sequence_insert_kernel));
  r.add("SequenceErase").set_kernel(fn_kernel(sequence_erase_kernel));
  r.add("SequenceLength").set_kernel(fn_kernel(sequence_length_kernel));
  r.add("SplitToSequence").set_kernel(fn_kernel(split_to_sequence_kernel));
  r.add("ConcatFromSequence").set_kernel(fn_kernel(concat_from_sequence_kernel));
  r.add("Optional").set_kernel(fn_kernel(optional_kernel));
  r.add("OptionalHasElement").set_kernel(fn_kernel(optional_has_element_kernel));
  r.add("OptionalGetElement").set_kernel(fn_kernel(optional_get_element_kernel));
}

}  // namespace gaf::runtime
