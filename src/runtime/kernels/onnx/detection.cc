// Detection ops: NonMaxSuppression and RoiAlign.
//
// NonMaxSuppression: per (batch, class), boxes with score > score_threshold are visited by decreasing score
// (ties: lower box index first); a box is kept unless its IoU with an already kept box of that class exceeds
// iou_threshold, up to max_output_boxes_per_class. Boxes are [y1, x1, y2, x2] with either diagonal corner
// order (center_point_box 0) or [x_center, y_center, width, height] (center_point_box 1). Boxes with zero
// area never suppress nor get suppressed. Output rows are (batch, class, box), batch-major then class, each
// class in selection order.
//
// RoiAlign: each region of interest is split into output_height x output_width bins; every bin averages (or
// takes the max of) sampling_ratio^2 bilinear samples (adaptive ceil(roi_size / bins) when sampling_ratio is
// 0). Sample positions and weights depend only on the region, so they are computed once per region and
// shared by all channels. The max mode follows the ONNX reference (and onnxruntime): the max over samples of
// the largest weighted corner term.
#include <algorithm>
#include <numeric>

#include "runtime/kernels/onnx/extra_util.h"

namespace gaf::runtime::extra {

namespace {

// ---- NonMaxSuppression ---------------------------------------------------------------------------------

template <class A>
struct Corners {
  A x0, y0, x1, y1, area;
};

template <class A>
bool suppresses(const Corners<A>& a, const Corners<A>& b, A iou_threshold) {
  const A ix0 = std::max(a.x0, b.x0), ix1 = std::min(a.x1, b.x1);
  if (ix1 <= ix0) return false;
  const A iy0 = std::max(a.y0, b.y0), iy1 = std::min(a.y1, b.y1);
  if (iy1 <= iy0) return false;
  const A inter = (ix1 - ix0) * (iy1 - iy0);
  if (inter <= 0 || a.area <= 0 || b.area <= 0) return false;
  const A uni = a.area + b.area - inter;
  if (uni <= 0) return false;
  return inter / uni > iou_threshold;
}

template <class T>
void nms_typed(KernelContext& ctx, const Tensor& boxes_t, const Tensor& scores_t, int64_t max_out,
               double iou_threshold, bool has_score_threshold, double score_threshold, bool center_box) {
  using A = acc_t<T>;
  const int64_t nb = scores_t.dim(0), nc = scores_t.dim(1), ns = scores_t.dim(2);
  const T* bp = boxes_t.data<T>();
  const T* sp = scores_t.data<T>();
  // Box corners once per box.
  std::vector<Corners<A>> corners(static_cast<size_t>(nb * ns));
  for (int64_t i = 0; i < nb * ns; ++i) {
    const A v0 = to_arith(bp[4 * i]), v1 = to_arith(bp[4 * i + 1]), v2 = to_arith(bp[4 * i + 2]),
            v3 = to_arith(bp[4 * i + 3]);
    Corners<A> c;
    if (center_box) {
      c.x0 = v0 - v2 / 2;
      c.x1 = v0 + v2 / 2;
      c.y0 = v1 - v3 / 2;
      c.y1 = v1 + v3 / 2;
    } else {
      c.y0 = std::min(v0, v2);
      c.y1 = std::max(v0, v2);
      c.x0 = std::min(v1, v3);
      c.x1 = std::max(v1, v3);
    }
    c.area = (c.x1 - c.x0) * (c.y1 - c.y0);
    corners[size_t(i)] = c;
  }
  const A iou = A(iou_threshold), sthr = A(score_threshold);
  std::vector<std::vector<int64_t>> selected(static_cast<size_t>(nb * nc));
  if (max_out > 0) {
    parallel_for(nb * nc, std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(ns * 16, 1)),
                 [&](int64_t b, int64_t e) {
                   std::vector<int64_t> cand;
                   std::vector<A> sc(static_cast<size_t>(ns));
                   for (int64_t u = b; u < e; ++u) {
                     const int64_t batch = u / nc;
                     const T* s = sp + u * ns;
                     cand.clear();
                     for (int64_t i = 0; i < ns; ++i) {
                       sc[size_t(i)] = to_arith(s[i]);
                       if (std::isnan(sc[size_t(i)])) continue;  // NaN scores are never selected
                       if (!has_score_threshold || sc[size_t(i)] > sthr) cand.push_back(i);
                     }
                     std::stable_sort(cand.begin(), cand.end(),
                                      [&](int64_t x, int64_t y) { return sc[size_t(x)] > sc[size_t(y)]; });
                     std::vector<int64_t>& keep = selected[size_t(u)];
                     const Corners<A>* bc = corners.data() + batch * ns;
                     for (int64_t i : cand) {
                       if (int64_t(keep.size()) >= max_out) break;
                       bool ok = true;
                       for (int64_t k : keep) {
                         if (suppresses(bc[k], bc[i], iou)) {
                           ok = false;
                           break;
                         }
                       }
                       if (ok) keep.push_back(i);
                     }
                   }
                 });
  }
  int64_t total = 0;
  for (const auto& v : selected) total += int64_t(v.size());
  int64_t* out = ctx.allocate_output(0, DType::Int64, {total, 3}).data<int64_t>();
  for (int64_t u = 0; u < nb * nc; ++u) {
    for (int64_t i : selected[size_t(u)]) {
      *out++ = u / nc;
      *out++ = u % nc;
      *out++ = i;
    }
  }
}

void nms_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const std::string d = node.describe();
  const Tensor& boxes = ctx.in(0);
  const Tensor& scores = ctx.in(1);
  GAF_CHECK(boxes.rank() == 3 && boxes.dim(2) == 4,
            "{}: boxes must have shape [num_batches, spatial_dimension, 4], got {}", d,
            dims_to_string(boxes.dims()));
  GAF_CHECK(scores.rank() == 3,
            "{}: scores must have shape [num_batches, num_classes, spatial_dimension], got {}", d,
            dims_to_string(scores.dims()));
  GAF_CHECK(scores.dim(0) == boxes.dim(0) && scores.dim(2) == boxes.dim(1),
            "{}: scores {} do not match boxes {} (expected [{}, num_classes, {}])", d,
            dims_to_string(scores.dims()), dims_to_string(boxes.dims()), boxes.dim(0), boxes.dim(1));
  GAF_CHECK(scores.dtype() == boxes.dtype(), "{}: scores are {} but boxes are {}", d,
            dtype_name(scores.dtype()), dtype_name(boxes.dtype()));
  const int64_t cpb = node.attr_int("center_point_box", 0);
  GAF_CHECK(cpb == 0 || cpb == 1, "{}: center_point_box must be 0 or 1, got {}", d, cpb);
  int64_t max_out = 0;
  if (const Tensor* t = ctx.input(2); t && t->numel() > 0) {
    GAF_CHECK(is_integer(t->dtype()), "{}: max_output_boxes_per_class must be an integer, got {}", d,
              dtype_name(t->dtype()));
    max_out = std::max<int64_t>(0, int64_t(scalar_value(*t, node, "max_output_boxes_per_class")));
  }
  double iou = 0;
  if (const Tensor* t = ctx.input(3); t && t->numel() > 0) iou = scalar_value(*t, node, "iou_threshold");
  GAF_CHECK(iou >= 0 && iou <= 1, "{}: iou_threshold must be in [0, 1], got {}", d, iou);
  bool has_st = false;
  double st = 0;
  if (const Tensor* t = ctx.input(4); t && t->numel() > 0) {
    has_st = true;
    st = scalar_value(*t, node, "score_threshold");
  }
  visit_float(boxes.dtype(), node, "boxes", [&](auto tag) {
    nms_typed<decltype(tag)>(ctx, boxes, scores, max_out, iou, has_st, st, cpb == 1);
  });
}

// ---- RoiAlign ------------------------------------------------------------------------------------------

template <class A>
struct Sample {
  int64_t pos[4];
  A w[4];
};

class RoiAlignKernel final : public Kernel {
 public:
  explicit RoiAlignKernel(const Node& node) {
    const std::string d = node.describe();
    const std::string mode = node.attr_string("mode", "avg");
    GAF_CHECK(mode == "avg" || mode == "max", "{}: mode '{}' is not valid (avg or max)", d, mode);
    max_ = mode == "max";
    // Opset 10 has no coordinate_transformation_mode and behaves as output_half_pixel.
    const std::string ctm = node.attr_string("coordinate_transformation_mode",
                                             node.opset >= 16 ? "half_pixel" : "output_half_pixel");
    GAF_CHECK(ctm == "half_pixel" || ctm == "output_half_pixel",
              "{}: coordinate_transformation_mode '{}' is not valid (half_pixel or output_half_pixel)", d,
              ctm);
    half_pixel_ = ctm == "half_pixel";
    oh_ = node.attr_int("output_height", 1);
    ow_ = node.attr_int("output_width", 1);
    sampling_ratio_ = node.attr_int("sampling_ratio", 0);
    spatial_scale_ = node.attr_float("spatial_scale", 1.f);
    GAF_CHECK(oh_ > 0 && ow_ > 0, "{}: output_height and output_width must be positive, got {} and {}", d,
              oh_, ow_);
    GAF_CHECK(sampling_ratio_ >= 0, "{}: sampling_ratio must be >= 0, got {}", d, sampling_ratio_);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node();
    const std::string d = node.describe();
    const Tensor& x = ctx.in(0);
    const Tensor& rois = ctx.in(1);
    const Tensor& bi = ctx.in(2);
    GAF_CHECK(x.rank() == 4, "{}: X must have shape [N, C, H, W], got {}", d, dims_to_string(x.dims()));
    GAF_CHECK(rois.rank() == 2 && rois.dim(1) == 4, "{}: rois must have shape [num_rois, 4], got {}", d,
              dims_to_string(rois.dims()));
    GAF_CHECK(rois.dtype() == x.dtype(), "{}: rois are {} but X is {}", d, dtype_name(rois.dtype()),
              dtype_name(x.dtype()));
    GAF_CHECK(bi.dims() == std::vector<int64_t>({rois.dim(0)}),
              "{}: batch_indices must have shape [{}], got {}", d, rois.dim(0), dims_to_string(bi.dims()));
    GAF_CHECK(bi.dtype() == DType::Int64 || bi.dtype() == DType::Int32,
              "{}: batch_indices must be int64, got {}", d, dtype_name(bi.dtype()));
    GAF_CHECK(rois.dim(0) * x.dim(1) == 0 || (x.dim(2) > 0 && x.dim(3) > 0),
              "{}: cannot pool from an empty feature map {}", d, dims_to_string(x.dims()));
    std::vector<int64_t> batch(static_cast<size_t>(rois.dim(0)));
    for (int64_t r = 0; r < rois.dim(0); ++r) {
      batch[size_t(r)] = bi.get_int(r);
      GAF_CHECK(batch[size_t(r)] >= 0 && batch[size_t(r)] < x.dim(0),
                "{}: batch_indices[{}] = {} is out of range for a batch of {}", d, r, batch[size_t(r)],
                x.dim(0));
    }
    visit_float(x.dtype(), node, "X", [&](auto tag) { run_typed<decltype(tag)>(ctx, x, rois, batch); });
  }

 private:
  template <class T>
  void run_typed(KernelContext& ctx, const Tensor& x, const Tensor& rois,
                 const std::vector<int64_t>& batch) const {
    using A = acc_t<T>;
    const int64_t R = rois.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
    T* y = ctx.allocate_output(0, x.dtype(), {R, C, oh_, ow_}).template data<T>();
    const T* xp = x.data<T>();
    const T* rp = rois.data<T>();
    std::vector<Region<A>> regions;
    for (int64_t r = 0; r < R; ++r) regions.push_back(region_of<T>(rp + r * 4, r, ctx.node()));
    constexpr int64_t kChan = 16;  // channels per work unit (sample positions are recomputed per unit)
    const int64_t cblocks = (C + kChan - 1) / kChan;
    parallel_for(
        R * cblocks, std::max<int64_t>(1, kWorkGrain / std::max<int64_t>(kChan * oh_ * ow_ * 16, 1)),
        [&](int64_t ub, int64_t ue) {
          std::vector<Sample<A>> samples;
          for (int64_t u = ub; u < ue; ++u) {
            const int64_t r = u / cblocks, c0 = (u % cblocks) * kChan, c1 = std::min(C, c0 + kChan);
            region_samples<A>(regions[size_t(r)], H, W, samples);
            const int64_t per_bin = regions[size_t(r)].gh * regions[size_t(r)].gw;
            const A inv = A(1) / A(std::max<int64_t>(per_bin, 1));
            for (int64_t c = c0; c < c1; ++c) {
              const T* plane = xp + (batch[size_t(r)] * C + c) * H * W;
              T* out = y + (r * C + c) * oh_ * ow_;
              const Sample<A>* s = samples.data();
              for (int64_t bin = 0; bin < oh_ * ow_; ++bin) {
                A acc = 0;
                for (int64_t k = 0; k < per_bin; ++k, ++s) {
                  const A t0 = s->w[0] * to_arith(plane[s->pos[0]]), t1 = s->w[1] * to_arith(plane[s->pos[1]]);
                  const A t2 = s->w[2] * to_arith(plane[s->pos[2]]), t3 = s->w[3] * to_arith(plane[s->pos[3]]);
                  if (max_) {
                    const A v = std::max(std::max(t0, t1), std::max(t2, t3));
                    acc = k == 0 ? v : std::max(acc, v);
                  } else {
                    acc += t0 + t1 + t2 + t3;
                  }
                }
                out[bin] = from_arith<T>(max_ ? acc : acc * inv);
              }
            }
          }
        });
  }

  // Where a region's bins and samples lie: computed (and checked) before the parallel part.
  template <class A>
  struct Region {
    A x0, y0, bh, bw;
    int64_t gh, gw;  // sampling grid per bin
  };

  template <class T>
  Region<acc_t<T>> region_of(const T* roi, int64_t r, const Node& node) const {
    using A = acc_t<T>;
    const A scale = A(spatial_scale_), off = half_pixel_ ? A(0.5) : A(0);
    const A x0 = to_arith(roi[0]) * scale - off, y0 = to_arith(roi[1]) * scale - off;
    const A x1 = to_arith(roi[2]) * scale - off, y1 = to_arith(roi[3]) * scale - off;
    GAF_CHECK(std::isfinite(x0) && std::isfinite(y0) && std::isfinite(x1) && std::isfinite(y1),
              "{}: roi {} has a non-finite coordinate", node.describe(), r);
    A rw = x1 - x0, rh = y1 - y0;
    if (!half_pixel_) {  // malformed regions are forced to 1x1
      rw = std::max(rw, A(1));
      rh = std::max(rh, A(1));
    }
    Region<A> g{x0, y0, rh / A(oh_), rw / A(ow_), sampling_ratio_, sampling_ratio_};
    if (sampling_ratio_ == 0) {
      const double gh = std::ceil(double(rh) / double(oh_)), gw = std::ceil(double(rw) / double(ow_));
      constexpr double kMaxSamples = double(1 << 22);
      GAF_CHECK(
          std::max(gh, 0.0) * std::max(gw, 0.0) * double(oh_ * ow_) <= kMaxSamples,
          "{}: roi {} ({} x {} after spatial_scale) needs more than {} adaptive samples; set sampling_ratio",
          node.describe(), r, rw, rh, kMaxSamples);
      g.gh = std::max<int64_t>(int64_t(gh), 0);
      g.gw = std::max<int64_t>(int64_t(gw), 0);
    }
    return g;
  }

  // Bilinear sample positions and weights of every bin of one region, bin-major.
  template <class A>
  void region_samples(const Region<A>& g, int64_t H, int64_t W, std::vector<Sample<A>>& samples) const {
    samples.resize(size_t(oh_ * ow_ * g.gh * g.gw));
    Sample<A>* s = samples.data();
    for (int64_t ph = 0; ph < oh_; ++ph)
      for (int64_t pw = 0; pw < ow_; ++pw)
        for (int64_t iy = 0; iy < g.gh; ++iy) {
          const A yy = g.y0 + A(ph) * g.bh + (A(iy) + A(0.5)) * g.bh / A(g.gh);
          for (int64_t ix = 0; ix < g.gw; ++ix, ++s) {
            const A xx = g.x0 + A(pw) * g.bw + (A(ix) + A(0.5)) * g.bw / A(g.gw);
            *s = bilinear<A>(yy, xx, H, W);
          }
        }
  }

  template <class A>
  static Sample<A> bilinear(A y, A x, int64_t H, int64_t W) {
    Sample<A> s{};
    if (y < -1 || y > A(H) || x < -1 || x > A(W)) return s;  // outside: contributes 0
    y = std::max(y, A(0));
    x = std::max(x, A(0));
    int64_t yl = int64_t(y), xl = int64_t(x), yh, xh;
    if (yl >= H - 1) {
      yh = yl = H - 1;
      y = A(yl);
    } else {
      yh = yl + 1;
    }
    if (xl >= W - 1) {
      xh = xl = W - 1;
      x = A(xl);
    } else {
      xh = xl + 1;
    }
    const A ly = y - A(yl), lx = x - A(xl), hy = 1 - ly, hx = 1 - lx;
    s.pos[0] = yl * W + xl;
    s.pos[1] = yl * W + xh;
    s.pos[2] = yh * W + xl;
    s.pos[3] = yh * W + xh;
    s.w[0] = hy * hx;
    s.w[1] = hy * lx;
    s.w[2] = ly * hx;
    s.w[3] = ly * lx;
    return s;
  }

  bool max_ = false;
  bool half_pixel_ = true;
  int64_t oh_ = 1, ow_ = 1, sampling_ratio_ = 0;
  float spatial_scale_ = 1.f;
};

}  // namespace

void register_extra_detection_ops(KernelRegistry& r) {
  r.add("NonMaxSuppression").set_kernel(fn_kernel(nms_kernel));
  r.add("RoiAlign").set_kernel([](const Node& n) { return std::make_unique<RoiAlignKernel>(n); });
}

}  // namespace gaf::runtime::extra
