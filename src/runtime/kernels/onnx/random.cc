// Random generators: RandomUniform(Like), RandomNormal(Like), Bernoulli. Flagged kRandom so the planner never
// fuses them (a fused kernel could change how many numbers are drawn and in which order). A 'seed' attribute makes
// a node repeatable run to run; without it each run draws fresh numbers.
#include <random>

#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace {

class RandomKernel final : public Kernel {
 public:
  enum class Kind { Uniform, Normal, Bernoulli };
  RandomKernel(const Node& n, Kind kind, bool like) : kind_(kind), like_(like) {
    if (n.has_attr("seed")) rng_.seed(uint64_t(std::llround(double(n.attr_float("seed", 0)))));
    else rng_.seed(std::random_device{}());
    if (kind == Kind::Uniform) {
      a_ = n.attr_float("low", 0.f);
      b_ = n.attr_float("high", 1.f);
    } else if (kind == Kind::Normal) {
      a_ = n.attr_float("mean", 0.f);
      b_ = n.attr_float("scale", 1.f);
    }
    dtype_attr_ = n.attr_int("dtype", -1);
    shape_ = n.attr_ints("shape");
  }

  void run(KernelContext& ctx) override {
    std::vector<int64_t> dims = shape_;
    DType dt = dtype_attr_ >= 0 ? DType(dtype_attr_) : DType::Float;
    if (like_) {
      const Tensor& x = ctx.in(0);
      dims = x.dims();
      if (dtype_attr_ < 0) dt = x.dtype();
    }
    GAF_CHECK(is_floating(dt) || (kind_ == Kind::Bernoulli && (is_integer(dt) || dt == DType::Bool)),
              "{}: output type {} is not valid here", ctx.node().describe(), dtype_name(dt));
    Tensor& out = ctx.allocate_output(0, dt, dims);
    visit_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      T* p = static_cast<T*>(out.raw());
      if (kind_ == Kind::Uniform) {
        std::uniform_real_distribution<double> d(a_, b_);
        for (int64_t i = 0; i < out.numel(); ++i) p[i] = from_double<T>(d(rng_));
      } else if (kind_ == Kind::Normal) {
        std::normal_distribution<double> d(a_, b_);
        for (int64_t i = 0; i < out.numel(); ++i) p[i] = from_double<T>(d(rng_));
      } else {
        const Tensor& prob = ctx.in(0);
        std::uniform_real_distribution<double> d(0.0, 1.0);
        for (int64_t i = 0; i < out.numel(); ++i) p[i] = from_double<T>(d(rng_) < prob.get_double(i) ? 1.0 : 0.0);
      }
    });
  }

 private:
  Kind kind_;
  bool like_;
  double a_ = 0, b_ = 1;
  int64_t dtype_attr_ = -1;
  std::vector<int64_t> shape_;
  std::mt19937_64 rng_;
};

KernelFactory random_factory(RandomKernel::Kind kind, bool like) {
  return [kind, like](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<RandomKernel>(n, kind, like); };
}

}  // namespace

void register_random_ops(KernelRegistry& r) {
  using K = RandomKernel::Kind;
  r.add("RandomUniform").set_kernel(random_factory(K::Uniform, false));
  r.add("RandomNormal").set_kernel(random_factory(K::Normal, false));
  r.add("RandomUniformLike").set_kernel(random_factory(K::Uniform, true));
  r.add("RandomNormalLike").set_kernel(random_factory(K::Normal, true));
  r.add("Bernoulli").set_kernel(random_factory(K::Bernoulli, true));
}

}  // namespace gaf::runtime
