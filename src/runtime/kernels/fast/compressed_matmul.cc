// gaf.CompressedMatMul(A, W, [scale], trans_b): Y = A x dequantise(W), W constant in bfloat16 or int8 (with a
// float scale per output column: w = scale[n] q), fp32 activations and accumulation. The weight-compression
// pass makes it from QDQ / Cast forms and from the rules' precision_mode; the written model decomposes it
// back to DequantizeLinear (or Cast) + MatMul. Every row count runs on Gemv over the compressed weights,
// packed once when the session starts, so a decode step reads a quarter (int8) or half (bf16) of the fp32
// bytes.
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/fast/gemv.h"

namespace gaf::runtime {

namespace {

class CompressedMatMul final : public Kernel {
 public:
  explicit CompressedMatMul(const Node& n) : node_(n) {
    const Value* w = n.input(1);
    GAF_CHECK(w && w->is_constant() && w->constant().rank() == 2, "{}: W must be a constant matrix",
              n.describe());
    const Tensor& t = w->constant();
    trans_b_ = n.attr_int("trans_b", 0) != 0;
    k_ = t.dim(trans_b_ ? 1 : 0);
    n_ = t.dim(trans_b_ ? 0 : 1);
    if (t.dtype() == DType::BFloat16) {
      gemv_ = std::make_unique<Gemv>(Gemv::Storage::BF16, t.raw(), nullptr, k_, n_, trans_b_);
    } else if (t.dtype() == DType::Int8) {
      const Value* s = n.input(2);
      GAF_CHECK(s && s->is_constant() && s->constant().dtype() == DType::Float &&
                    (s->constant().numel() == n_ || s->constant().numel() == 1),
                "{}: int8 W needs a constant float scale of {} elements (one per output column) or 1",
                n.describe(), n_);
      std::vector<float> scale(size_t(n_), s->constant().data<float>()[0]);
      if (s->constant().numel() == n_) std::copy_n(s->constant().data<float>(), n_, scale.begin());
      gemv_ = std::make_unique<Gemv>(Gemv::Storage::Int8, t.raw(), scale.data(), k_, n_, trans_b_);
    } else {
      fail("{}: W is {}; expected bfloat16 or int8", n.describe(), dtype_name(t.dtype()));
    }
  }

  // W and its scale live on in Gemv's packed copy alone.
  bool keeps_own_copy(int i) const override { return i == 1 || i == 2; }

  void run(KernelContext& ctx) override {
    const Tensor& a = ctx.in(0);
    GAF_CHECK(a.dtype() == DType::Float && a.rank() >= 1 && a.dim(-1) == k_,
              "{}: A is {}{}, expected float [..., {}]", node_.describe(), dtype_name(a.dtype()),
              dims_to_string(a.dims()), k_);
    std::vector<int64_t> out = a.dims();
    out.back() = n_;
    Tensor& y = ctx.allocate_output(0, DType::Float, out);
    gemv_->run(a.data<float>(), k_ ? a.numel() / k_ : 0, k_, y.data<float>());
  }

 private:
  const Node& node_;
  bool trans_b_ = false;
  int64_t k_ = 0, n_ = 0;
  std::unique_ptr<Gemv> gemv_;
};

}  // namespace

void register_compressed_matmul(KernelRegistry& r) {
  r.add("CompressedMatMul", "gaf").set_kernel([](const Node& n) -> std::unique_ptr<Kernel> {
    return std::make_unique<CompressedMatMul>(n);
  });
}

}  // namespace gaf::runtime
