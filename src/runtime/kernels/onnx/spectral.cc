// Spectral ops: DFT (opset 17, and opset 20 where axis became an input), STFT and MelWeightMatrix (opset 17).
//
// DFT and STFT share one transform (Fft): a mixed-radix FFT in double, decimating in time by the length's
// prime factors (smallest first), with twiddles from a table of exact angles 2 pi i / n. Any length works; a
// prime length is its direct O(n^2) sum, a length whose prime factors are small costs O(n * sum of factors).
// Both ops then differ only in where a transform's samples come from (a line along an axis; a windowed frame)
// and where its spectrum goes, which transform_lines takes as a per-line layout. Complex values are trailing
// [re, im] pairs, as ONNX stores them; a real signal has a trailing dim of 1.
#include <complex>
#include <numbers>

#include "runtime/kernels/onnx/misc_util.h"

namespace gaf::runtime {

namespace {

using Complex = std::complex<double>;

// ---- The shared transform ----

// The DFT of length n: y[k] = sum_j x[j] e^(-2 pi i j k / n), or for the inverse e^(+2 pi i j k / n) scaled
// by 1/n.
class Fft {
 public:
  Fft(int64_t n, bool inverse) : n_(n), scale_(inverse ? 1.0 / double(n) : 1.0) {
    GAF_ASSERT(n >= 1, "Fft: the length must be positive");
    const double sign = inverse ? 1.0 : -1.0;
    twiddles_.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      const double angle = sign * 2.0 * std::numbers::pi * double(i) / double(n);
      twiddles_[size_t(i)] = {std::cos(angle), std::sin(angle)};
    }
    // Level d transforms length lengths_[d] by splitting it into factors_[d] interleaved subsequences.
    for (int64_t m = n; m > 1;) {
      int64_t p = 2;
      while (p * p <= m && m % p != 0) ++p;
      if (m % p != 0) p = m;  // m is prime
      lengths_.push_back(m);
      factors_.push_back(p);
      m /= p;
    }
    lengths_.push_back(1);
  }

  int64_t size() const { return n_; }

  // y = the transform of x; x, y and scratch hold n values each, x is left as it is.
  void run(const Complex* x, Complex* y, Complex* scratch) const {
    transform(x, 1, 0, y, scratch);
    if (scale_ != 1.0)
      for (int64_t k = 0; k < n_; ++k) y[k] *= scale_;
  }

 private:
  // The length-m DFT (m = lengths_[level]) of x[0], x[stride], ..., x[(m - 1) stride] into y[0, m). Its
  // twiddle w_m^e is twiddles_[e * n / m].
  void transform(const Complex* x, int64_t stride, size_t level, Complex* y, Complex* scratch) const {
    const int64_t m = lengths_[level];
    if (m == 1) {
      y[0] = x[0];
      return;
    }
    const int64_t p = factors_[level], q = m / p, step = n_ / m;
    // Subsequence r (x[r], x[r + p], ...) has length q; its transform Y_r goes to y[r q, (r + 1) q).
    for (int64_t r = 0; r < p; ++r) transform(x + r * stride, stride * p, level + 1, y + r * q, scratch);
    // X[k] = sum_r w_m^(r k) Y_r[k mod q]. The levels below are done with scratch, so this one may use it.
    for (int64_t k = 0; k < m; ++k) {
      const int64_t s = k % q;
      Complex acc = y[s];
      for (int64_t r = 1; r < p; ++r) acc += y[r * q + s] * twiddles_[size_t((r * k % m) * step)];
      scratch[k] = acc;
    }
    std::copy(scratch, scratch + m, y);
  }

  int64_t n_;
  double scale_;
  std::vector<Complex> twiddles_;  // e^(-+2 pi i t / n), t in [0, n)
  std::vector<int64_t> lengths_, factors_;
};

// Where one transform's samples come from and where its spectrum goes, as element offsets and strides (the
// imaginary part, when there is one, follows the real part).
struct Line {
  int64_t src, src_stride, count;  // count samples, zero-padded to the transform's length
  int64_t dst, dst_stride;
};

// Runs `lines` transforms of fft across threads. layout(l) gives line l's Line; a sample is (re, im) from src
// with `channels` = 2, (re, 0) with 1, times window[j] when there is a window; the first `bins` values of the
// spectrum are written.
template <class T, class Layout>
void transform_lines(const Fft& fft, int64_t lines, int64_t bins, const T* src, int64_t channels,
                     const std::vector<double>* window, T* dst, Layout&& layout) {
  const int64_t n = fft.size();
  const int64_t grain = std::max<int64_t>(1, kElemGrain / (8 * n));
  parallel_for(lines, grain, [&](int64_t b, int64_t e) {
    std::vector<Complex> in(static_cast<size_t>(n)), out(static_cast<size_t>(n)),
        scratch(static_cast<size_t>(n));
    for (int64_t l = b; l < e; ++l) {
      const Line ln = layout(l);
      std::fill(in.begin(), in.end(), Complex{});
      for (int64_t j = 0; j < ln.count; ++j) {
        const T* s = src + ln.src + j * ln.src_stride;
        in[size_t(j)] = {to_double(s[0]), channels == 2 ? to_double(s[1]) : 0.0};
        if (window) in[size_t(j)] *= (*window)[size_t(j)];
      }
      fft.run(in.data(), out.data(), scratch.data());
      for (int64_t k = 0; k < bins; ++k) {
        T* d = dst + ln.dst + k * ln.dst_stride;
        d[0] = from_double<T>(out[size_t(k)].real());
        d[1] = from_double<T>(out[size_t(k)].imag());
      }
    }
  });
}

// An optional input: null when absent.
const Tensor* optional_input(const KernelContext& ctx, int i) {
  const Tensor* t = ctx.input(i);
  return t && t->defined() ? t : nullptr;
}

// The value of an integer scalar input (a length, a step, a count).
int64_t int_input(const Tensor& t, const Node& node, const char* what) {
  GAF_CHECK(is_integer(t.dtype()), "{}: input '{}' must be an int32 or int64 scalar, got element type {}",
            node.describe(), what, dtype_name(t.dtype()));
  scalar_input(t, node, what);  // one element
  return t.get_int(0);
}

// Number of bins kept from a length-n spectrum: all, or for a onesided one the nonredundant floor(n/2) + 1
// (a real signal's spectrum is conjugate symmetric: X[n - k] = conj(X[k])).
int64_t kept_bins(int64_t n, bool onesided) { return onesided ? n / 2 + 1 : n; }

// Checks the trailing dim of a signal is 1 (real) or 2 (complex).
void check_complex_dim(const Tensor& x, const Node& node, const char* layout) {
  GAF_CHECK(x.rank() >= 2 && (x.dim(-1) == 1 || x.dim(-1) == 2),
            "{}: the input must be {} with a last dim of 1 (real) or 2 (complex: re, im), got shape {}",
            node.describe(), layout, dims_to_string(x.dims()));
}

// ---- DFT ----

// The transform along one axis of [batch, signal dims..., 1 | 2]; output [batch, signal dims..., 2] with the
// axis' dim the transform's length (dft_length, default the dim itself: shorter lines are zero-padded, longer
// ones truncated), or its floor(n/2) + 1 nonredundant bins when onesided. The ONNX reference keeps the first
// floor(n/2) + 1 bins of a complex input too, so onesided is not refused for one.
void dft_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.in(0);
  check_complex_dim(x, node, "[batch, signal dims..., 1 | 2]");
  const int rank = x.rank();
  // Opset 20 made the axis input 2 (default -2, the last signal dim); before, it is an attribute (default 1).
  int64_t axis = node.attr_int("axis", 1);
  if (node.opset >= 20) {
    const Tensor* a = optional_input(ctx, 2);
    axis = a ? int_input(*a, node, "axis") : -2;
  }
  const int64_t a = axis < 0 ? axis + rank : axis;
  GAF_CHECK(
      a >= 0 && a < rank - 1,
      "{}: axis {} does not name a signal dim of the input of shape {}: it must lie in [{}, {}] (the last "
      "dim holds re, im)",
      node.describe(), axis, dims_to_string(x.dims()), -rank, rank - 2);
  const bool inverse = node.attr_int("inverse", 0) != 0;
  const bool onesided = node.attr_int("onesided", 0) != 0;
  if (inverse && onesided) {
    if (node.opset >= 20)
      unsupported("{}: inverse=1 with onesided=1 (a real signal from its onesided spectrum) is not supported",
                  node.describe());
    fail("{}: inverse=1 and onesided=1 cannot be set together (opset {}); set onesided=0", node.describe(),
         node.opset);
  }
  const int64_t len = x.dim(int(a));
  int64_t n = len;
  if (const Tensor* l = optional_input(ctx, 1)) {
    n = int_input(*l, node, "dft_length");
    GAF_CHECK(n >= 1, "{}: dft_length must be positive, got {}", node.describe(), n);
  }
  const int64_t bins = kept_bins(n, onesided);
  std::vector<int64_t> out_dims = x.dims();
  out_dims[size_t(a)] = bins;
  out_dims.back() = 2;
  Tensor& out = ctx.allocate_output(0, x.dtype(), out_dims);
  if (out.numel() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d) outer *= x.dim(d);
  for (int d = int(a) + 1; d < rank - 1; ++d) inner *= x.dim(d);
  const int64_t channels = x.dim(-1);
  const Fft fft(n, inverse);
  // Line l = (o, i): input element (o, j, i, c) is at ((o len + j) inner + i) channels + c, output bin (o, k,
  // i) at ((o bins + k) inner + i) 2.
  visit_float(x.dtype(), node, "the input", [&](auto tag) {
    using T = decltype(tag);
    transform_lines(fft, outer * inner, bins, x.data<T>(), channels, nullptr, out.data<T>(), [&](int64_t l) {
      const int64_t o = l / inner, i = l % inner;
      return Line{(o * len * inner + i) * channels, inner * channels, std::min(len, n),
                  (o * bins * inner + i) * 2, inner * 2};
    });
  });
}

// ---- STFT ----

// Transforms of frames of a [batch, length, 1 | 2] signal: frame f starts at f * frame_step and has
// frame_length samples (the frame_length input, or the window's length), each multiplied by the window when
// there is one. Output [batch, frames, bins, 2], frames = (length - frame_length) / frame_step + 1, bins
// floor(frame_length / 2) + 1 when onesided (the default) else frame_length.
void stft_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& signal = ctx.in(0);
  check_complex_dim(signal, node, "[batch, length, 1 | 2]");
  GAF_CHECK(signal.rank() == 3, "{}: the signal must be [batch, length, 1 | 2], got shape {}",
            node.describe(), dims_to_string(signal.dims()));
  const int64_t batch = signal.dim(0), length = signal.dim(1), channels = signal.dim(2);
  const int64_t step = int_input(ctx.in(1), node, "frame_step");
  GAF_CHECK(step >= 1, "{}: frame_step must be positive, got {}", node.describe(), step);
  const Tensor* window_t = optional_input(ctx, 2);
  const Tensor* frame_length_t = optional_input(ctx, 3);
  GAF_CHECK(window_t || frame_length_t,
            "{}: give a window or a frame_length (inputs 2 and 3): both are absent", node.describe());
  std::vector<double> window;
  if (window_t) {
    GAF_CHECK(window_t->rank() == 1, "{}: the window must be rank 1 [frame_length], got shape {}",
              node.describe(), dims_to_string(window_t->dims()));
    window.resize(size_t(window_t->numel()));
    for (int64_t j = 0; j < window_t->numel(); ++j) window[size_t(j)] = window_t->get_double(j);
  }
  const int64_t frame_length =
      frame_length_t ? int_input(*frame_length_t, node, "frame_length") : int64_t(window.size());
  GAF_CHECK(frame_length >= 1, "{}: frame_length must be positive, got {}", node.describe(), frame_length);
  GAF_CHECK(!window_t || int64_t(window.size()) == frame_length,
            "{}: the window has {} values but frame_length is {}; they must be equal", node.describe(),
            window.size(), frame_length);
  GAF_CHECK(frame_length <= length,
            "{}: frame_length {} is longer than the signal ({} samples): shorten the frame or pad the signal",
            node.describe(), frame_length, length);
  const bool onesided = node.attr_int("onesided", 1) != 0;
  const int64_t frames = (length - frame_length) / step + 1;
  const int64_t bins = kept_bins(frame_length, onesided);
  Tensor& out = ctx.allocate_output(0, signal.dtype(), {batch, frames, bins, 2});
  if (out.numel() == 0) return;
  const Fft fft(frame_length, /*inverse=*/false);
  visit_float(signal.dtype(), node, "the signal", [&](auto tag) {
    using T = decltype(tag);
    transform_lines(
        fft, batch * frames, bins, signal.data<T>(), channels, window_t ? &window : nullptr, out.data<T>(),
        [&](int64_t l) {
          const int64_t b = l / frames, f = l % frames;
          return Line{(b * length + f * step) * channels, channels, frame_length, l * bins * 2, 2};
        });
  });
}

// ---- MelWeightMatrix ----

// The [floor(dft_length / 2) + 1, num_mel_bins] matrix of triangular filters, as the ONNX reference builds
// it: num_mel_bins + 2 points evenly spaced on the HTK mel scale mel(f) = 2595 log10(1 + f / 700), starting
// at lower_edge_hertz with a step of (mel(upper) - mel(lower)) / (num_mel_bins + 2), each mapped to the
// integer spectrogram bin floor((dft_length + 1) f / sample_rate). Filter i rises linearly from bin[i] (0) to
// bin[i + 1] (1) and falls to bin[i + 2] (0, excluded); a filter whose rising edge is empty is 1 at its
// centre. Bins past the spectrogram (an upper edge above sample_rate / 2) are left out.
void mel_weight_matrix_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const int64_t num_mel_bins = int_input(ctx.in(0), node, "num_mel_bins");
  const int64_t dft_length = int_input(ctx.in(1), node, "dft_length");
  const int64_t sample_rate = int_input(ctx.in(2), node, "sample_rate");
  const double lower = scalar_input(ctx.in(3), node, "lower_edge_hertz");
  const double upper = scalar_input(ctx.in(4), node, "upper_edge_hertz");
  GAF_CHECK(num_mel_bins >= 0, "{}: num_mel_bins must not be negative, got {}", node.describe(),
            num_mel_bins);
  GAF_CHECK(dft_length >= 1 && sample_rate >= 1,
            "{}: dft_length and sample_rate must be positive, got {} and {}", node.describe(), dft_length,
            sample_rate);
  GAF_CHECK(lower >= 0 && lower <= upper,
            "{}: the edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz, got {} and {}",
            node.describe(), lower, upper);
  const DType dt = output_datatype_attr(node);
  const int64_t rows = dft_length / 2 + 1;
  Tensor& out = ctx.allocate_output(0, dt, {rows, num_mel_bins}, /*zero=*/true);

  auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  auto hertz = [](double m) { return 700.0 * (std::pow(10.0, m / 2595.0) - 1.0); };
  const double low_mel = mel(lower), mel_step = (mel(upper) - low_mel) / double(num_mel_bins + 2);
  std::vector<int64_t> bin(size_t(num_mel_bins + 2));
  for (int64_t i = 0; i < num_mel_bins + 2; ++i)
    bin[size_t(i)] = int64_t(
        std::floor(double(dft_length + 1) * hertz(double(i) * mel_step + low_mel) / double(sample_rate)));
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    auto set = [&](int64_t row, int64_t col, double v) {
      if (row >= 0 && row < rows) o[row * num_mel_bins + col] = from_double<T>(v);
    };
    for (int64_t i = 0; i < num_mel_bins; ++i) {
      const int64_t left = bin[size_t(i)], centre = bin[size_t(i + 1)], right = bin[size_t(i + 2)];
      if (centre == left)
        set(centre, i, 1.0);
      else
        for (int64_t j = left; j <= centre; ++j) set(j, i, double(j - left) / double(centre - left));
      for (int64_t j = centre; j < right; ++j) set(j, i, double(right - j) / double(right - centre));
    }
  });
}

}  // namespace

void register_spectral_ops(KernelRegistry& r) {
  r.add("DFT").set_kernel(fn_kernel(dft_kernel));
  r.add("STFT").set_kernel(fn_kernel(stft_kernel));
  r.add("MelWeightMatrix").set_kernel(fn_kernel(mel_weight_matrix_kernel));
}

}  // namespace gaf::runtime
