// Resize (opset 10, 11, 13) and its deprecated form Upsample (opset 7, 9): N-D nearest / linear / cubic
// interpolation with every coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside and
// extrapolation_value (tf_crop_and_resize).
//
// Interpolation is separable: every axis gets a table of taps (input index, weight) per output index, and an
// output element is the sum over the product of its axes' taps. Axes whose taps all reduce to one input
// element with weight 1 (unscaled batch and channel axes, integer coordinates) collapse to one tap, so the
// common 2-D cases cost 2x2 (linear) or 4x4 (cubic) loads per element, and nearest is a plain gather.
//
// The coordinate transform follows the ONNX reference: when `scales` is given, the resized length used by
// align_corners / pytorch_half_pixel / tf_crop_and_resize is input_length * scale (not the rounded output
// length).
#include <cmath>
#include <limits>

#include "runtime/kernels/onnx/misc_util.h"

namespace gaf::runtime {

namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNN, TfCropAndResize };
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeAttrs {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// Per-axis interpolation table: K taps per output index.
struct AxisPlan {
  int K = 1;
  std::vector<int64_t> idx;      // [out_len * K] input indices along the axis, always in range
  std::vector<double> w;         // [out_len * K] weights
  std::vector<uint8_t> outside;  // [out_len] 1: tf_crop_and_resize coordinate outside the input
  bool any_outside = false;
};

struct AxisSpec {
  int64_t in_len, out_len;
  double scale;        // output / input
  double len_resized;  // input_length * scale (scales given) or output length (sizes given)
  double roi_start = 0, roi_end = 1;
};

double original_coordinate(double x, const AxisSpec& a, Coord c) {
  switch (c) {
    case Coord::HalfPixel:
      return (x + 0.5) / a.scale - 0.5;
    case Coord::PytorchHalfPixel:
      return a.len_resized > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case Coord::AlignCorners:
      return a.len_resized == 1 ? 0.0 : x * double(a.in_len - 1) / (a.len_resized - 1);
    case Coord::Asymmetric:
      return x / a.scale;
    case Coord::TfHalfPixelForNN:
      return (x + 0.5) / a.scale;
    case Coord::TfCropAndResize:
      return a.len_resized > 1
                 ? a.roi_start * double(a.in_len - 1) +
                       x * (a.roi_end - a.roi_start) * double(a.in_len - 1) / (a.len_resized - 1)
                 : 0.5 * (a.roi_start + a.roi_end) * double(a.in_len - 1);
  }
  return 0.0;
}

int64_t nearest_index(double x, NearestMode m) {
  const double f = std::floor(x);
  const double r = x - f;
  if (r == 0) return int64_t(f);
  switch (m) {
    case NearestMode::RoundPreferFloor:
      return int64_t(r <= 0.5 ? f : f + 1);
    case NearestMode::RoundPreferCeil:
      return int64_t(r < 0.5 ? f : f + 1);
    case NearestMode::Floor:
      return int64_t(f);
    case NearestMode::Ceil:
      return int64_t(f + 1);
  }
  return int64_t(f);
}

// Keys' cubic convolution weights for the taps at floor(x) - 1 .. floor(x) + 2, t = x - floor(x).
void cubic_weights(double t, double A, double c[4]) {
  const double t1 = t + 1, t2 = 1 - t, t3 = 2 - t;
  c[0] = ((A * t1 - 5 * A) * t1 + 8 * A) * t1 - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * t2 - (A + 3)) * t2 * t2 + 1;
  c[3] = ((A * t3 - 5 * A) * t3 + 8 * A) * t3 - 4 * A;
}

AxisPlan build_axis_plan(const AxisSpec& a, const ResizeAttrs& at) {
  AxisPlan p;
  p.K = at.mode == Mode::Nearest ? 1 : at.mode == Mode::Linear ? 2 : 4;
  const int K = p.K;
  const int64_t n = a.out_len, last = a.in_len - 1;
  p.idx.assign(size_t(n * K), 0);
  p.w.assign(size_t(n * K), 0.0);
  p.outside.assign(size_t(n), 0);
  auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i, 0, last); };
  for (int64_t x = 0; x < n; ++x) {
    const double xo = original_coordinate(double(x), a, at.coord);
    int64_t* idx = &p.idx[size_t(x * K)];
    double* w = &p.w[size_t(x * K)];
    if (at.coord == Coord::TfCropAndResize && !(xo >= 0 && xo <= double(last))) {
      p.outside[x] = 1;
      p.any_outside = true;
      continue;  // taps stay (index 0, weight 0)
    }
    if (at.mode == Mode::Nearest) {
      idx[0] = clampi(nearest_index(xo, at.nearest));
      w[0] = 1.0;
    } else if (at.mode == Mode::Linear) {
      const double xc = std::clamp(xo, 0.0, double(last));
      const double f = std::floor(xc);
      const double t = xc - f;
      idx[0] = int64_t(f);
      idx[1] = clampi(int64_t(f) + 1);
      w[0] = 1.0 - t;
      w[1] = t;
    } else {
      const double f = std::floor(xo);
      cubic_weights(xo - f, at.cubic_a, w);
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t raw = int64_t(f) - 1 + k;
        idx[k] = clampi(raw);
        if (at.exclude_outside && (raw < 0 || raw > last)) w[k] = 0;
        sum += w[k];
      }
      if (at.exclude_outside && sum != 0)
        for (int k = 0; k < 4; ++k) w[k] /= sum;
    }
  }
  // Collapse to one tap when every output index reads exactly one input element with weight 1.
  if (K > 1) {
    bool single = true;
    std::vector<int64_t> idx1(static_cast<size_t>(n));
    for (int64_t x = 0; x < n && single; ++x) {
      int nonzero = 0;
      for (int k = 0; k < K; ++k) {
        double w = p.w[size_t(x * K + k)];
        if (w == 0) continue;
        ++nonzero;
        idx1[x] = p.idx[size_t(x * K + k)];
        single = single && w == 1.0;
      }
      single = single && (nonzero == 1 || (nonzero == 0 && p.outside[x]));
    }
    if (single) {
      p.K = 1;
      p.idx = std::move(idx1);
      p.w.assign(size_t(n), 1.0);
    }
  }
  return p;
}

// Walks the output rows (all axes but the last) of [b, e), calling f(row, input_offsets, weights,
// row_outside) with the cartesian product of the outer axes' taps.
template <class F>
void for_each_row(const std::vector<int64_t>& out_dims, const std::vector<int64_t>& in_strides,
                  const std::vector<AxisPlan>& plans, int64_t b, int64_t e, F&& f) {
  const int outer = int(out_dims.size()) - 1;
  std::vector<int64_t> ri(size_t(outer), 0);
  int64_t rem = b;
  for (int a = outer - 1; a >= 0; --a) {
    ri[a] = rem % out_dims[a];
    rem /= out_dims[a];
  }
  std::vector<int64_t> offs, noffs;
  std::vector<double> ws, nws;
  for (int64_t row = b; row < e; ++row) {
    offs.assign(1, 0);
    ws.assign(1, 1.0);
    bool outside = false;
    for (int a = 0; a < outer; ++a) {
      const AxisPlan& pl = plans[a];
      const int64_t x = ri[a];
      outside = outside || pl.outside[x];
      if (pl.K == 1) {
        const int64_t d = pl.idx[x] * in_strides[a];
        for (auto& o : offs) o += d;
        continue;
      }
      noffs.clear();
      nws.clear();
      for (size_t c = 0; c < offs.size(); ++c)
        for (int k = 0; k < pl.K; ++k) {
          noffs.push_back(offs[c] + pl.idx[size_t(x * pl.K + k)] * in_strides[a]);
          nws.push_back(ws[c] * pl.w[size_t(x * pl.K + k)]);
        }
      offs.swap(noffs);
      ws.swap(nws);
    }
    f(row, offs, ws, outside);
    for (int a = outer - 1; a >= 0; --a) {
      if (++ri[a] < out_dims[a]) break;
      ri[a] = 0;
    }
  }
}

// Every axis has one tap of weight 1: a gather (any element type, no arithmetic).
template <class T>
void resize_gather(const T* in, T* out, const std::vector<int64_t>& out_dims,
                   const std::vector<int64_t>& in_strides, const std::vector<AxisPlan>& plans,
                   T extrapolation) {
  const int64_t out_last = out_dims.back();
  if (out_last == 0) return;
  const int64_t rows = numel_of(out_dims) / out_last;
  const AxisPlan& pl = plans.back();
  const int64_t* il = pl.idx.data();
  const int64_t grain = std::max<int64_t>(1, kElemGrain / out_last);
  parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    int64_t prev_off = -1;
    const T* prev = nullptr;
    for_each_row(
        out_dims, in_strides, plans, b, e,
        [&](int64_t row, const std::vector<int64_t>& offs, const std::vector<double>&, bool outside) {
          T* o = out + row * out_last;
          if (outside) {
            std::fill(o, o + out_last, extrapolation);
            prev = nullptr;
            return;
          }
          if (prev && offs[0] == prev_off) {  // same source row as the previous output row
            std::copy(prev, prev + out_last, o);
            return;
          }
          const T* src = in + offs[0];
          for (int64_t j = 0; j < out_last; ++j) o[j] = src[il[j]];
          if (pl.any_outside)
            for (int64_t j = 0; j < out_last; ++j)
              if (pl.outside[j]) o[j] = extrapolation;
          prev = o;
          prev_off = offs[0];
        });
  });
}

template <class T, class Cm>
inline T store_interp(Cm v) {
  if constexpr (is_float_like_v<T>) {
    return from_arith<T>(arith_t<T>(v));
  } else {
    // Integer data: round to nearest and saturate (a cubic overshoot must not wrap around).
    v = std::nearbyint(v);
    const Cm lo = Cm(std::numeric_limits<T>::lowest()), hi = Cm(std::numeric_limits<T>::max());
    v = v > lo ? v : lo;
    v = v < hi ? v : hi;
    return T(v);
  }
}

// Weighted interpolation in two separable passes; Cm is the arithmetic type.
//   1. every input row (all axes but the last) the output reads is interpolated along the last axis into a
//      row of out_last values (gathers, K taps each);
//   2. every output row is the weighted sum of the pass-1 rows of its outer taps (contiguous, vectorised).
template <class T, class Cm>
void resize_interp(const T* in, T* out, const std::vector<int64_t>& in_dims,
                   const std::vector<int64_t>& out_dims, const std::vector<int64_t>& in_strides,
                   const std::vector<AxisPlan>& plans, double extrapolation) {
  const int64_t out_last = out_dims.back(), in_last = in_dims.back();
  if (out_last == 0) return;
  const int64_t rows_out = numel_of(out_dims) / out_last, rows_in = numel_of(in_dims) / in_last;
  const AxisPlan& pl = plans.back();
  const int K = pl.K;
  const int64_t* il = pl.idx.data();
  const std::vector<Cm> wl(pl.w.begin(), pl.w.end());
  const T extra = store_interp<T, Cm>(Cm(extrapolation));

  std::vector<uint8_t> used(static_cast<size_t>(rows_in), 0);
  for_each_row(out_dims, in_strides, plans, 0, rows_out,
               [&](int64_t, const std::vector<int64_t>& offs, const std::vector<double>&, bool outside) {
                 if (!outside)
                   for (int64_t off : offs) used[size_t(off / in_last)] = 1;
               });
  std::vector<Cm> tmp(static_cast<size_t>(rows_in * out_last));
  parallel_for(rows_in, std::max<int64_t>(1, kElemGrain / (out_last * K)), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      if (!used[row]) continue;
      const T* src = in + row * in_last;
      Cm* t = tmp.data() + row * out_last;
      const Cm* w = wl.data();
      if (K == 1) {
        for (int64_t j = 0; j < out_last; ++j) t[j] = w[j] * Cm(to_arith(src[il[j]]));
      } else if (K == 2) {
        for (int64_t j = 0; j < out_last; ++j)
          t[j] = w[2 * j] * Cm(to_arith(src[il[2 * j]])) + w[2 * j + 1] * Cm(to_arith(src[il[2 * j + 1]]));
      } else {
        for (int64_t j = 0; j < out_last; ++j) {
          const int64_t* ij = il + 4 * j;
          const Cm* wj = w + 4 * j;
          t[j] = wj[0] * Cm(to_arith(src[ij[0]])) + wj[1] * Cm(to_arith(src[ij[1]])) +
                 wj[2] * Cm(to_arith(src[ij[2]])) + wj[3] * Cm(to_arith(src[ij[3]]));
        }
      }
    }
  });

  int64_t combos = 1;
  for (size_t a = 0; a + 1 < plans.size(); ++a) combos *= plans[a].K;
  parallel_for(rows_out, std::max<int64_t>(1, kElemGrain / (out_last * combos)), [&](int64_t b, int64_t e) {
    std::vector<Cm> acc(static_cast<size_t>(out_last));
    for_each_row(
        out_dims, in_strides, plans, b, e,
        [&](int64_t row, const std::vector<int64_t>& offs, const std::vector<double>& ws, bool outside) {
          T* o = out + row * out_last;
          if (outside) {
            std::fill(o, o + out_last, extra);
            return;
          }
          Cm* a = acc.data();
          for (size_t c = 0; c < offs.size(); ++c) {
            const Cm* t = tmp.data() + (offs[c] / in_last) * out_last;
            const Cm wc = Cm(ws[c]);
            if (c == 0)
              for (int64_t j = 0; j < out_last; ++j) a[j] = wc * t[j];
            else
              for (int64_t j = 0; j < out_last; ++j) a[j] += wc * t[j];
          }
          for (int64_t j = 0; j < out_last; ++j) o[j] = store_interp<T, Cm>(a[j]);
          if (pl.any_outside)
            for (int64_t j = 0; j < out_last; ++j)
              if (pl.outside[j]) o[j] = extra;
        });
  });
}

class ResizeKernel final : public Kernel {
 public:
  ResizeKernel(const Node& n, bool upsample) : upsample_(upsample), legacy_(upsample || n.opset < 11) {
    const std::string mode = n.attr_string("mode", "nearest");
    if (mode == "nearest")
      attrs_.mode = Mode::Nearest;
    else if (mode == "linear")
      attrs_.mode = Mode::Linear;
    else if (mode == "cubic" && !legacy_)
      attrs_.mode = Mode::Cubic;
    else
      unsupported("{}: mode '{}' is not supported", n.describe(), mode);
    if (legacy_) {
      // Upsample and Resize-10 are asymmetric with floor rounding (ONNX's Resize 10 -> 11 version adapter).
      attrs_.coord = Coord::Asymmetric;
      attrs_.nearest = NearestMode::Floor;
      if (upsample && n.opset < 9) {
        scales_attr_ = n.attr_floats("scales");
        GAF_CHECK(!scales_attr_.empty(), "{}: attribute 'scales' is required", n.describe());
      }
      return;
    }
    const std::string coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
    if (coord == "half_pixel")
      attrs_.coord = Coord::HalfPixel;
    else if (coord == "pytorch_half_pixel")
      attrs_.coord = Coord::PytorchHalfPixel;
    else if (coord == "align_corners")
      attrs_.coord = Coord::AlignCorners;
    else if (coord == "asymmetric")
      attrs_.coord = Coord::Asymmetric;
    else if (coord == "tf_half_pixel_for_nn")
      attrs_.coord = Coord::TfHalfPixelForNN;
    else if (coord == "tf_crop_and_resize")
      attrs_.coord = Coord::TfCropAndResize;
    else
      unsupported("{}: coordinate_transformation_mode '{}' is not supported", n.describe(), coord);
    const std::string nearest = n.attr_string("nearest_mode", "round_prefer_floor");
    if (nearest == "round_prefer_floor")
      attrs_.nearest = NearestMode::RoundPreferFloor;
    else if (nearest == "round_prefer_ceil")
      attrs_.nearest = NearestMode::RoundPreferCeil;
    else if (nearest == "floor")
      attrs_.nearest = NearestMode::Floor;
    else if (nearest == "ceil")
      attrs_.nearest = NearestMode::Ceil;
    else
      unsupported("{}: nearest_mode '{}' is not supported", n.describe(), nearest);
    attrs_.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
    attrs_.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
    attrs_.extrapolation = n.attr_float("extrapolation_value", 0.f);
    // Opset 18 additions.
    if (n.attr_int("antialias", 0) != 0) unsupported("{}: antialias is not supported", n.describe());
    if (n.has_attr("axes")) unsupported("{}: the 'axes' attribute is not supported", n.describe());
    const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch")
      unsupported("{}: keep_aspect_ratio_policy '{}' is not supported", n.describe(), policy);
  }

  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor& x = ctx.in(0);
    const int rank = x.rank();
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    const Tensor* roi = nullptr;
    if (legacy_) {
      if (upsample_ && n.opset < 9)
        scales.assign(scales_attr_.begin(), scales_attr_.end());
      else
        scales = read_scales(ctx.in(1), n);
    } else {
      roi = nonempty(ctx.input(1));
      const Tensor* s = nonempty(ctx.input(2));
      const Tensor* z = nonempty(ctx.input(3));
      GAF_CHECK(!(s && z), "{}: give either 'scales' or 'sizes', not both", n.describe());
      GAF_CHECK(s || z, "{}: one of 'scales' and 'sizes' is required", n.describe());
      if (s) scales = read_scales(*s, n);
      if (z) {
        GAF_CHECK(is_integer(z->dtype()) && z->rank() == 1,
                  "{}: 'sizes' must be a 1-D int64 tensor, got {}{}", n.describe(), dtype_name(z->dtype()),
                  dims_to_string(z->dims()));
        sizes = z->to_int_vector();
      }
    }
    const size_t want = size_t(rank);
    GAF_CHECK(scales.empty() || scales.size() == want, "{}: {} scales for an input of rank {} ({})",
              n.describe(), scales.size(), rank, dims_to_string(x.dims()));
    GAF_CHECK(sizes.empty() || sizes.size() == want, "{}: {} sizes for an input of rank {} ({})",
              n.describe(), sizes.size(), rank, dims_to_string(x.dims()));
    std::vector<double> roi_v;
    if (attrs_.coord == Coord::TfCropAndResize) {
      GAF_CHECK(roi, "{}: tf_crop_and_resize needs the 'roi' input", n.describe());
      GAF_CHECK(roi->numel() == 2 * rank, "{}: 'roi' must have 2 * rank = {} values, it has {}", n.describe(),
                2 * rank, roi->numel());
      for (int64_t i = 0; i < roi->numel(); ++i) roi_v.push_back(roi->get_double(i));
    }

    std::vector<AxisSpec> axes(want);
    std::vector<int64_t> out_dims(want);
    for (int a = 0; a < rank; ++a) {
      AxisSpec& s = axes[a];
      s.in_len = x.dim(a);
      if (!roi_v.empty()) s.roi_start = roi_v[a], s.roi_end = roi_v[a + rank];
      if (!scales.empty()) {
        GAF_CHECK(scales[a] > 0 && std::isfinite(scales[a]),
                  "{}: scale {} of axis {} must be positive and finite", n.describe(), scales[a], a);
        s.scale = scales[a];
        // floor(input * scale) in fp32, as ONNX shape inference, the ONNX reference and onnxruntime compute
        // it (none of them applies the roi extent the operator text mentions for tf_crop_and_resize).
        s.out_len = int64_t(std::floor(float(s.in_len) * float(s.scale)));
        s.len_resized = double(s.in_len) * s.scale;
      } else {
        GAF_CHECK(sizes[a] >= 0, "{}: size {} of axis {} is negative", n.describe(), sizes[a], a);
        s.out_len = sizes[a];
        s.scale = s.in_len > 0 ? double(s.out_len) / double(s.in_len) : 1.0;
        s.len_resized = double(s.out_len);
      }
      GAF_CHECK(s.in_len > 0 || s.out_len == 0, "{}: axis {} is empty in the input but {} in the output",
                n.describe(), a, s.out_len);
      out_dims[a] = s.out_len;
    }
    if (rank == 0) {
      ctx.set_output(0, x);
      return;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out_dims);
    if (y.numel() == 0) return;
    std::vector<AxisPlan> plans(want);
    bool gather = true;
    for (int a = 0; a < rank; ++a) {
      plans[a] = build_axis_plan(axes[a], attrs_);
      gather = gather && plans[a].K == 1;
    }
    const auto in_strides = contiguous_strides(x.dims());
    if (x.dtype() == DType::String) {
      bool outside = false;
      for (const auto& p : plans) outside = outside || p.any_outside;
      if (!gather || outside)
        unsupported("{}: string tensors can only be resized by nearest without extrapolation", n.describe());
      resize_gather(x.strings(), y.strings(), out_dims, in_strides, plans, std::string());
      return;
    }
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if (gather) {
        resize_gather(x.data<T>(), y.data<T>(), out_dims, in_strides, plans,
                      from_double<T>(attrs_.extrapolation));
      } else if constexpr (std::is_same_v<T, bool>) {
        unsupported("{}: {} interpolation of bool tensors is not supported", n.describe(),
                    attrs_.mode == Mode::Linear ? "linear" : "cubic");
      } else if constexpr (std::is_same_v<T, double> || (std::is_integral_v<T> && sizeof(T) >= 4)) {
        resize_interp<T, double>(x.data<T>(), y.data<T>(), x.dims(), out_dims, in_strides, plans,
                                 attrs_.extrapolation);
      } else {
        resize_interp<T, float>(x.data<T>(), y.data<T>(), x.dims(), out_dims, in_strides, plans,
                                attrs_.extrapolation);
      }
    });
  }

 private:
  static const Tensor* nonempty(const Tensor* t) { return t && t->numel() > 0 ? t : nullptr; }
  static std::vector<double> read_scales(const Tensor& s, const Node& n) {
    GAF_CHECK(is_floating(s.dtype()) && s.rank() == 1, "{}: 'scales' must be a 1-D float tensor, got {}{}",
              n.describe(), dtype_name(s.dtype()), dims_to_string(s.dims()));
    std::vector<double> v(static_cast<size_t>(s.numel()));
    for (int64_t i = 0; i < s.numel(); ++i) v[i] = s.get_double(i);
    return v;
  }

  bool upsample_;
  bool legacy_;  // Upsample, or Resize before opset 11: inputs (X, scales), asymmetric, nearest floor
  ResizeAttrs attrs_;
  std::vector<float> scales_attr_;
};

}  // namespace

void register_misc_resize_ops(KernelRegistry& r) {
  r.add("Resize").set_kernel(
      [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<ResizeKernel>(n, false); });
  r.add("Upsample").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<ResizeKernel>(n, true);
  });
}

}  // namespace gaf::runtime
