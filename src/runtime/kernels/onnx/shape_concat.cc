// Concat and Split: viewed as [outer, axis * inner], every input (output) contributes one contiguous run per
// outer row, copied with memcpy; parallel over outer rows, or within each run when there are few rows. And
// gaf.ChannelShuffle (below), a concatenation's channel shuffle.
#include "runtime/kernels/families.h"
#include "runtime/kernels/onnx/shape_util.h"

namespace gaf::runtime {

namespace {

// A run-wise copy between a set of "parts" and one "whole": part p has rows of part_row[p] elements at
// parts[p] + o * part_row[p]; in the whole they sit at whole + o * whole_row + part_off[p].
struct RunCopy {
  int64_t outer = 0, whole_row = 0;
  std::vector<int64_t> part_row, part_off;

  // kToWhole: parts are the (const) sources, whole the destination; otherwise the reverse.
  template <bool kToWhole, class WholePtr, class PartPtr>
  void run(DType dtype, WholePtr whole, const std::vector<PartPtr>& parts) const {
    visit_bytes(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using WT = std::conditional_t<kToWhole, T*, const T*>;
      using PT = std::conditional_t<kToWhole, const T*, T*>;
      auto copy = [](WT w, PT p, int64_t n, bool par) {
        T* dst;
        const T* src;
        if constexpr (kToWhole) {
          dst = w;
          src = p;
        } else {
          dst = p;
          src = w;
        }
        if constexpr (std::is_trivially_copyable_v<T>) {
          if (par) return parallel_memcpy(dst, src, size_t(n) * sizeof(T));
        }
        copy_elems(dst, src, n);
      };
      WT w = static_cast<WT>(whole);
      const int threads = omp_get_max_threads();
      if (std::is_trivially_copyable_v<T> && outer < threads && outer * whole_row > kCopyGrain) {
        // Few long rows: split each run across threads.
        for (int64_t o = 0; o < outer; ++o)
          for (size_t p = 0; p < parts.size(); ++p)
            copy(w + o * whole_row + part_off[p], static_cast<PT>(parts[p]) + o * part_row[p], part_row[p],
                 true);
        return;
      }
      parallel_for(outer, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(whole_row, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t o = b; o < e; ++o)
                       for (size_t p = 0; p < parts.size(); ++p)
                         copy(w + o * whole_row + part_off[p], static_cast<PT>(parts[p]) + o * part_row[p],
                              part_row[p], false);
                   });
    });
  }
};

}  // namespace

void concat_into(Tensor& y, const std::vector<const Tensor*>& parts, int axis) {
  if (y.numel() == 0) return;
  const int r = y.rank();
  RunCopy rc;
  rc.outer = prod(y.dims(), 0, axis);
  rc.whole_row = prod(y.dims(), axis, r);
  std::vector<const void*> raw;
  int64_t off = 0;
  for (const Tensor* t : parts) {
    int64_t row = prod(t->dims(), axis, r);
    if (row == 0) continue;
    rc.part_row.push_back(row);
    rc.part_off.push_back(off);
    raw.push_back(t->raw());
    off += row;
  }
  rc.run<true>(y.dtype(), y.raw(), raw);
}

void split_into(const Tensor& x, const std::vector<Tensor*>& parts, int axis) {
  const int r = x.rank();
  RunCopy rc;
  rc.outer = prod(x.dims(), 0, axis);
  rc.whole_row = prod(x.dims(), axis, r);
  std::vector<void*> raw;
  int64_t off = 0;
  for (Tensor* y : parts) {
    const int64_t row = prod(y->dims(), axis, r);
    if (row > 0) {
      rc.part_row.push_back(row);
      rc.part_off.push_back(off);
      raw.push_back(y->raw());
    }
    off += row;
  }
  if (x.numel() > 0 && !raw.empty()) rc.run<false>(x.dtype(), x.raw(), raw);
}

namespace {

void concat_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  GAF_CHECK(ctx.num_inputs() >= 1, "{}: needs at least one input", node.describe());
  const Tensor& first = ctx.in(0);
  GAF_CHECK(node.has_attr("axis") || node.opset < 4, "{}: the axis attribute is missing", node.describe());
  const int r = first.rank();
  GAF_CHECK(r > 0, "{}: cannot concatenate scalars", node.describe());
  const int axis = normalize_axis(node.attr_int("axis", 1), r, node);
  std::vector<int64_t> out_dims = first.dims();
  out_dims[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.in(i);
    GAF_CHECK(t.dtype() == first.dtype(), "{}: input {} is {}, input 0 is {}", node.describe(), i,
              dtype_name(t.dtype()), dtype_name(first.dtype()));
    bool ok = t.rank() == r;
    for (int d = 0; ok && d < r; ++d) ok = d == axis || t.dim(d) == first.dim(d);
    GAF_CHECK(ok, "{}: input {} has shape {}, which does not match input 0 {} outside axis {}",
              node.describe(), i, dims_to_string(t.dims()), dims_to_string(first.dims()), axis);
    out_dims[axis] += t.dim(axis);
  }
  std::vector<const Tensor*> parts;
  for (int i = 0; i < ctx.num_inputs(); ++i) parts.push_back(&ctx.in(i));
  concat_into(ctx.allocate_output(0, first.dtype(), out_dims), parts, axis);
}

void split_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  const int r = x.rank();
  GAF_CHECK(r > 0, "{}: cannot split a scalar", node.describe());
  const int axis = normalize_axis(node.attr_int("axis", 0), r, node);
  const int64_t dim = x.dim(axis);
  const int n = ctx.num_outputs();
  std::vector<int64_t> sizes;
  if (node.opset >= 13) {
    if (const Tensor* s = ctx.input(1)) sizes = read_ints(*s, node, "split");
  } else {
    sizes = node.attr_ints("split");
  }
  if (!sizes.empty()) {
    GAF_CHECK(int(sizes.size()) == n, "{}: split has {} entries for {} outputs", node.describe(),
              sizes.size(), n);
    check_split_lengths(sizes, dim, axis, node);
  } else if (node.opset >= 18) {
    // Split-18: num_outputs parts of ceil(dim / n); the last one takes what remains.
    const int64_t parts = node.attr_int("num_outputs", n);
    GAF_CHECK(parts == n && n > 0, "{}: num_outputs is {} but the node has {} outputs", node.describe(),
              parts, n);
    GAF_CHECK(dim >= n, "{}: cannot split axis {} of size {} into {} parts", node.describe(), axis, dim, n);
    const int64_t chunk = (dim + n - 1) / n;
    GAF_CHECK(chunk * (n - 1) < dim, "{}: cannot split axis {} of size {} into {} non-empty parts of {}",
              node.describe(), axis, dim, n, chunk);
    for (int i = 0; i < n; ++i) sizes.push_back(std::min(chunk, dim - chunk * i));
  } else {
    GAF_CHECK(dim % n == 0, "{}: axis {} of size {} cannot be split into {} equal parts; give split sizes",
              node.describe(), axis, dim, n);
    sizes.assign(n, dim / n);
  }
  std::vector<Tensor*> outs;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> dims = x.dims();
    dims[axis] = sizes[i];
    outs.push_back(&ctx.allocate_output(i, x.dtype(), dims));
  }
  split_into(x, outs, axis);
}

// gaf.ChannelShuffle<axis>(X_0 .. X_{G-1}) -> Y_0 .. Y_{K-1} (channel-shuffle-fusion): S is the concatenation of
// the X_g along axis with its channels interleaved, S[.., i G + g, ..] = X_g[.., i, ..]; the Y_k are S's K equal
// parts along axis. Each output row is written once from runs of the inputs' rows (a run of one element
// channels-last, where two groups interleave in a loop the compiler vectorises).
void channel_shuffle_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const int groups = ctx.num_inputs(), parts = ctx.num_outputs();
  GAF_CHECK(groups >= 1 && parts >= 1, "{}: needs inputs and outputs", node.describe());
  const Tensor& first = ctx.in(0);
  const int r = first.rank();
  GAF_CHECK(r > 0, "{}: cannot shuffle scalars", node.describe());
  const int axis = normalize_axis(node.attr_int("axis", -1), r, node);
  for (int i = 1; i < groups; ++i)
    GAF_CHECK(ctx.in(i).dtype() == first.dtype() && ctx.in(i).dims() == first.dims(),
              "{}: input {} is {} {}, input 0 is {} {}; the groups must be alike", node.describe(), i,
              dtype_name(ctx.in(i).dtype()), dims_to_string(ctx.in(i).dims()), dtype_name(first.dtype()),
              dims_to_string(first.dims()));
  const int64_t c = first.dim(axis), channels = c * groups;
  GAF_CHECK(channels % parts == 0, "{}: {} shuffled channels do not split into {} equal parts", node.describe(),
            channels, parts);
  const int64_t part = channels / parts, outer = prod(first.dims(), 0, axis);
  const int64_t inner = prod(first.dims(), axis + 1, r);
  std::vector<int64_t> dims = first.dims();
  dims[axis] = part;
  std::vector<const void*> xs;
  std::vector<void*> ys;
  for (int i = 0; i < groups; ++i) xs.push_back(ctx.in(i).raw());
  for (int k = 0; k < parts; ++k) ys.push_back(ctx.allocate_output(k, first.dtype(), dims).raw());
  if (outer * part * inner == 0) return;
  visit_bytes(first.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t row = part * inner;  // elements of one output row
    parallel_for(outer * parts, std::max<int64_t>(1, kCopyGrain / row), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / parts, k = t % parts, m0 = k * part;
        T* y = static_cast<T*>(ys[size_t(k)]) + o * row;
        if (inner == 1 && groups == 2 && m0 % 2 == 0 && part % 2 == 0) {
          const T* a = static_cast<const T*>(xs[0]) + o * c + m0 / 2;
          const T* b = static_cast<const T*>(xs[1]) + o * c + m0 / 2;
          for (int64_t j = 0; j < part / 2; ++j) {
            y[2 * j] = a[j];
            y[2 * j + 1] = b[j];
          }
          continue;
        }
        for (int64_t j = 0; j < part; ++j) {
          const int64_t m = m0 + j;
          copy_elems(y + j * inner, static_cast<const T*>(xs[size_t(m % groups)]) + (o * c + m / groups) * inner,
                     inner);
        }
      }
    });
  });
}

}  // namespace

void register_shape_concat_ops(KernelRegistry& r) {
  r.add("ChannelShuffle", "gaf").set_kernel(fn_kernel(channel_shuffle_kernel));
  r.add("Concat").set_kernel(fn_kernel(concat_kernel));
  r.add("Split").set_kernel(fn_kernel(split_kernel));
}

}  // namespace gaf::runtime
