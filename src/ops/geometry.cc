#include "ops/geometry.h"

#include <fmt/ranges.h>

#include "gaf/status.h"
#include "gaf/tensor.h"

namespace gaf::ops {

Dims broadcast_shape(std::span<const Dims> shapes, const Node& node) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Dims out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      GAF_CHECK(o == 1, "{}: shapes cannot be broadcast together ({} vs dimension {} of size {})",
                node.describe(), dims_to_string(s), rank - s.size() + i, o);
      o = d;
    }
  }
  return out;
}

Dims broadcast_shape(const Dims& a, const Dims& b, const Node& node) {
  Dims shapes[2] = {a, b};
  return broadcast_shape(std::span<const Dims>(shapes, 2), node);
}

Dims broadcast_strides(const Dims& dims, const Dims& out) {
  Dims s(out.size(), 0);
  auto cs = contiguous_strides(dims);
  size_t off = out.size() - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) s[off + i] = dims[i] == 1 && out[off + i] != 1 ? 0 : cs[i];
  return s;
}

std::optional<Dims> static_input_dims(const Node& n, int i) {
  const Value* v = n.input(i);
  if (!v || !v->type.has_static_shape()) return std::nullopt;
  return v->type.static_dims();
}

Dims channels_last_logical(const Dims& d) {
  if (d.size() < 3) return d;
  Dims l = {d[0], d.back()};
  l.insert(l.end(), d.begin() + 1, d.end() - 1);
  return l;
}

WindowAttrs WindowAttrs::parse(const Node& node) {
  WindowAttrs a;
  a.kernel_shape = node.attr_ints("kernel_shape");
  a.strides = node.attr_ints("strides");
  a.dilations = node.attr_ints("dilations");
  a.pads = node.attr_ints("pads");
  a.auto_pad = node.attr_string("auto_pad", "NOTSET");
  a.ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  a.output_padding = node.attr_ints("output_padding");
  a.output_shape = node.attr_ints("output_shape");
  if (a.auto_pad.empty()) a.auto_pad = "NOTSET";
  if (a.auto_pad != "NOTSET" && a.auto_pad != "VALID" && a.auto_pad != "SAME_UPPER" &&
      a.auto_pad != "SAME_LOWER")
    fail("{}: auto_pad '{}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER", node.describe(),
         a.auto_pad);
  return a;
}

namespace {

Dims per_dim(const Node& node, const char* name, const Dims& v, size_t rank, int64_t def, size_t factor = 1) {
  if (v.empty()) return Dims(rank * factor, def);
  GAF_CHECK(v.size() == rank * factor,
            "{}: attribute '{}' has {} values, expected {} for {} spatial dimensions", node.describe(), name,
            v.size(), rank * factor, rank);
  return v;
}

void fill_common(const Node& node, const WindowAttrs& a, const Dims& in, const Dims& kernel, Window& w) {
  const size_t r = in.size();
  GAF_CHECK(r >= 1, "{}: the input needs at least one spatial dimension", node.describe());
  GAF_CHECK(kernel.size() == r, "{}: kernel has {} spatial dimensions but the input has {}", node.describe(),
            kernel.size(), r);
  if (!a.kernel_shape.empty())
    GAF_CHECK(a.kernel_shape == kernel, "{}: kernel_shape {} does not match the weights' spatial shape {}",
              node.describe(), dims_to_string(a.kernel_shape), dims_to_string(kernel));
  w.in = in;
  w.k = kernel;
  w.s = per_dim(node, "strides", a.strides, r, 1);
  w.d = per_dim(node, "dilations", a.dilations, r, 1);
  Dims pads = per_dim(node, "pads", a.pads, r, 0, 2);
  w.pb.assign(pads.begin(), pads.begin() + r);
  w.pe.assign(pads.begin() + r, pads.end());
  for (size_t i = 0; i < r; ++i) {
    GAF_CHECK(w.k[i] >= 1, "{}: kernel size {} in dimension {} must be positive", node.describe(), w.k[i], i);
    GAF_CHECK(w.s[i] >= 1, "{}: stride {} in dimension {} must be positive", node.describe(), w.s[i], i);
    GAF_CHECK(w.d[i] >= 1, "{}: dilation {} in dimension {} must be positive", node.describe(), w.d[i], i);
    GAF_CHECK(w.in[i] >= 0, "{}: negative input size", node.describe());
  }
}

}  // namespace

Window forward_window(const Node& node, const WindowAttrs& a, const Dims& in, const Dims& kernel) {
  Window w;
  fill_common(node, a, in, kernel, w);
  const int r = w.rank();
  for (int i = 0; i < r; ++i) {
    const int64_t ext = w.extent(i);
    if (a.auto_pad == "VALID") {
      w.pb[i] = w.pe[i] = 0;
    } else if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      int64_t out = (w.in[i] + w.s[i] - 1) / w.s[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.s[i] + ext - w.in[i]);
      int64_t small = total / 2;
      w.pb[i] = a.auto_pad == "SAME_UPPER" ? small : total - small;
      w.pe[i] = total - w.pb[i];
    } else {
      GAF_CHECK(w.pb[i] >= 0 && w.pe[i] >= 0, "{}: pads must not be negative (got {})", node.describe(),
                fmt::join(a.pads, ","));
    }
    const int64_t span = w.in[i] + w.pb[i] + w.pe[i] - ext;
    GAF_CHECK(span >= 0,
              "{}: the window ({} with dilation {}) is larger than the padded input ({} + {} + {}) in "
              "spatial dimension {}",
              node.describe(), w.k[i], w.d[i], w.in[i], w.pb[i], w.pe[i], i);
    int64_t out = (a.ceil_mode ? (span + w.s[i] - 1) / w.s[i] : span / w.s[i]) + 1;
    // With ceil_mode the last window must start inside the input or its begin padding.
    if (a.ceil_mode && (out - 1) * w.s[i] >= w.in[i] + w.pb[i]) --out;
    w.out.push_back(out);
  }
  return w;
}

Window transpose_window(const Node& node, const WindowAttrs& a, const Dims& in, const Dims& kernel) {
  Window w;
  fill_common(node, a, in, kernel, w);
  const int r = w.rank();
  Dims op = per_dim(node, "output_padding", a.output_padding, r, 0);
  Dims target;
  if (!a.output_shape.empty()) {
    // output_shape lists the spatial dims; some exporters write the full N, C, spatial shape.
    target = a.output_shape;
    if (int(target.size()) == r + 2) target.erase(target.begin(), target.begin() + 2);
    GAF_CHECK(int(target.size()) == r, "{}: output_shape has {} values for {} spatial dimensions",
              node.describe(), a.output_shape.size(), r);
  }
  for (int i = 0; i < r; ++i) {
    GAF_CHECK(op[i] >= 0, "{}: output_padding must not be negative", node.describe());
    const int64_t full = w.s[i] * (w.in[i] - 1) + op[i] + w.extent(i);
    bool same = a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER";
    if (!target.empty() || same) {
      int64_t out = !target.empty() ? target[i] : w.in[i] * w.s[i];
      int64_t total = full - out;
      // C++ division truncates toward zero: a negative total (output larger than natural) pads the end.
      int64_t half = total / 2;
      if (a.auto_pad == "SAME_LOWER") {
        w.pb[i] = total - half;
        w.pe[i] = half;
      } else {
        w.pb[i] = half;
        w.pe[i] = total - half;
      }
    } else if (a.auto_pad == "VALID") {
      w.pb[i] = w.pe[i] = 0;
    } else {
      GAF_CHECK(w.pb[i] >= 0 && w.pe[i] >= 0, "{}: pads must not be negative (got {})", node.describe(),
                fmt::join(a.pads, ","));
    }
    int64_t out = full - w.pb[i] - w.pe[i];
    GAF_CHECK(out >= 1, "{}: output size {} in spatial dimension {} is not positive", node.describe(), out,
              i);
    w.out.push_back(out);
  }
  // From here on pe is the end padding net of output_padding: out = s*(in-1) + extent - pb - pe, as oneDNN
  // counts.
  for (int i = 0; i < r; ++i) w.pe[i] -= op[i];
  return w;
}

ConvShape conv_shape(const Node& node, bool transpose, const WindowAttrs& attrs, int64_t group, const Dims& x,
                     const Dims& w, const Dims* b) {
  GAF_CHECK(x.size() >= 3, "{}: input X must be N x C x spatial (rank >= 3), got {}", node.describe(),
            dims_to_string(x));
  GAF_CHECK(w.size() == x.size(), "{}: weights W {} must have the rank of X {}", node.describe(),
            dims_to_string(w), dims_to_string(x));
  GAF_CHECK(group >= 1, "{}: group must be positive, got {}", node.describe(), group);
  ConvShape s;
  s.N = x[0];
  s.C = x[1];
  s.G = group;
  if (!transpose) {
    s.M = w[0];
    GAF_CHECK(w[1] * group == s.C, "{}: X has {} channels but W {} with group {} expects {}", node.describe(),
              s.C, dims_to_string(w), group, w[1] * group);
    GAF_CHECK(s.M % group == 0, "{}: {} output channels are not divisible by group {}", node.describe(), s.M,
              group);
  } else {
    GAF_CHECK(w[0] == s.C, "{}: X has {} channels but W {} expects {}", node.describe(), s.C,
              dims_to_string(w), w[0]);
    GAF_CHECK(s.C % group == 0, "{}: {} input channels are not divisible by group {}", node.describe(), s.C,
              group);
    s.M = w[1] * group;
  }
  if (b)
    GAF_CHECK(b->size() == 1 && (*b)[0] == s.M, "{}: bias B must be [{}], got {}", node.describe(), s.M,
              dims_to_string(*b));
  Dims in(x.begin() + 2, x.end()), k(w.begin() + 2, w.end());
  s.win = transpose ? transpose_window(node, attrs, in, k) : forward_window(node, attrs, in, k);
  s.out = {s.N, s.M};
  s.out.insert(s.out.end(), s.win.out.begin(), s.win.out.end());
  return s;
}

MatMulShape matmul_shape(const Node& node, const Dims& a, const Dims& b) {
  GAF_CHECK(!a.empty() && !b.empty(), "{}: MatMul operands must have rank >= 1 (got {} and {})",
            node.describe(), dims_to_string(a), dims_to_string(b));
  MatMulShape m;
  m.a_vec = a.size() == 1;
  m.b_vec = b.size() == 1;
  Dims ac = m.a_vec ? Dims{1, a[0]} : a;
  Dims bc = m.b_vec ? Dims{b[0], 1} : b;
  m.M = ac[ac.size() - 2];
  m.K = ac.back();
  m.N = bc.back();
  GAF_CHECK(
      bc[bc.size() - 2] == m.K,
      "{}: inner dimensions differ: A is {} and B is {} (A's last dimension must equal B's {} dimension)",
      node.describe(), dims_to_string(a), dims_to_string(b), m.b_vec ? "only" : "second-to-last");
  m.a_batch.assign(ac.begin(), ac.end() - 2);
  m.b_batch.assign(bc.begin(), bc.end() - 2);
  m.batch = broadcast_shape(m.a_batch, m.b_batch, node);
  m.out = m.batch;
  if (!m.a_vec) m.out.push_back(m.M);
  if (!m.b_vec) m.out.push_back(m.N);
  return m;
}

BatchedMatMul batched_matmul(const Node& node, const Dims& a, const Dims& b) {
  MatMulShape s = matmul_shape(node, a, b);
  BatchedMatMul m;
  m.out = s.out;
  m.batch = s.batch;
  m.M = s.M;
  m.N = s.N;
  m.K = s.K;
  m.a_vec = s.a_vec;
  m.b_vec = s.b_vec;
  m.count = numel_of(m.batch);
  const Dims& ba = s.a_batch;
  const Dims& bb = s.b_batch;
  const size_t r = m.batch.size();
  Dims pa(r - ba.size(), 1), pb(r - bb.size(), 1);
  pa.insert(pa.end(), ba.begin(), ba.end());
  pb.insert(pb.end(), bb.begin(), bb.end());
  Dims sa = broadcast_strides(pa, m.batch), sb = broadcast_strides(pb, m.batch);
  m.a_index.assign(m.count, 0);
  m.b_index.assign(m.count, 0);
  for (int64_t i = 0; i < m.count; ++i) {
    int64_t rem = i;
    for (int d = int(r) - 1; d >= 0; --d) {
      const int64_t idx = rem % m.batch[d];
      rem /= m.batch[d];
      m.a_index[i] += idx * sa[d];
      m.b_index[i] += idx * sb[d];
    }
  }
  return m;
}

}  // namespace gaf::ops
