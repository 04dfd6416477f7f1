// A graph's generated kernels: emit every fused node, compile them (codegen::compile_kernels: translation
// units built in parallel, each a library), and wrap each exported function in a runtime Kernel that binds
// symbolic dims, checks shapes and allocates outputs.
#include "runtime/graph_kernels.h"

#include "gaf/kernel.h"
#include "runtime/kernels/dnnl/anchor_postops.h"

namespace gaf::runtime {

using codegen::DimExpr;
using codegen::KernelSignature;
using codegen::Library;

namespace {

using KernelFnPtr = void (*)(const void* const*, void* const*, const int64_t*, const codegen::KernelScratch*);

// A kernel's working memory for one call, from the session's allocator (its buffer pool), back to it when the
// call returns. The kernel is C: an allocation failure is kept and rethrown once it has returned.
struct ScratchLender {
  Allocator* alloc = nullptr;
  std::vector<std::shared_ptr<void>> lent;
  std::exception_ptr failed;

  static void* take(void* self, size_t bytes) noexcept {
    auto* l = static_cast<ScratchLender*>(self);
    try {
      l->lent.push_back(l->alloc->allocate(bytes ? bytes : 1));
      return l->lent.back().get();
    } catch (...) {
      l->failed = std::current_exception();
      return nullptr;
    }
  }
};

class GeneratedKernel final : public Kernel {
 public:
  GeneratedKernel(KernelSignature sig, KernelFnPtr fn, std::shared_ptr<Library> lib)
      : sig_(std::move(sig)), fn_(fn), lib_(std::move(lib)) {}

  void run(KernelContext& ctx) override {
    GAF_CHECK(ctx.num_inputs() == int(sig_.input_dims.size()), "{}: {} inputs given, the kernel takes {}",
              ctx.node().describe(), ctx.num_inputs(), sig_.input_dims.size());
    std::vector<int64_t> sym(sig_.symbol_binds.size());
    for (size_t k = 0; k < sym.size(); ++k) {
      auto [i, d] = sig_.symbol_binds[k];
      const Tensor& t = ctx.in(i);
      GAF_CHECK(d < t.rank(), "{}: input {} has rank {}", ctx.node().describe(), i, t.rank());
      sym[k] = t.dim(d);
    }
    auto resolve = [&](const std::vector<DimExpr>& dims) {
      std::vector<int64_t> out;
      for (const DimExpr& e : dims) out.push_back(e.value >= 0 ? e.value : sym[e.symbol]);
      return out;
    };
    in_ptrs_.resize(sig_.input_dims.size());
    for (size_t i = 0; i < sig_.input_dims.size(); ++i) {
      const Tensor& t = ctx.in(int(i));
      std::vector<int64_t> want = resolve(sig_.input_dims[i]);
      GAF_CHECK(t.dims() == want, "{}: input {} has shape {}, the fused kernel was built for {}",
                ctx.node().describe(), i, dims_to_string(t.dims()), dims_to_string(want));
      in_ptrs_[i] = t.raw();
    }
    out_ptrs_.resize(sig_.output_dims.size());
    for (size_t o = 0; o < sig_.output_dims.size(); ++o)
      out_ptrs_[o] = ctx.allocate_output(int(o), sig_.output_dtypes[o], resolve(sig_.output_dims[o])).raw();
    scratch_.alloc = &ctx.allocator();
    const codegen::KernelScratch lend{&ScratchLender::take, &scratch_};
    fn_(in_ptrs_.data(), out_ptrs_.data(), sym.data(), &lend);
    scratch_.lent.clear();
    if (scratch_.failed) {
      std::exception_ptr failed = std::exchange(scratch_.failed, nullptr);
      std::rethrow_exception(failed);
    }
  }

 private:
  KernelSignature sig_;
  KernelFnPtr fn_;
  std::shared_ptr<Library> lib_;  // keeps the code loaded
  std::vector<const void*> in_ptrs_;
  std::vector<void*> out_ptrs_;
  ScratchLender scratch_;
};

std::string c_identifier(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r;
}

}  // namespace

GraphKernels build_graph_kernels(const Graph& g, const codegen::EmitOptions& emit,
                                 const codegen::CompileOptions& compile) {
  GraphKernels out;
  std::vector<const Node*> emitted_nodes;
  int index = 0;
  for (const Node* n : g.nodes()) {
    if (!n->body) continue;
    std::string why;
    bool has_anchor = false;
    for (const Node* b : n->body->nodes()) has_anchor |= op_kind(*b) == OpKind::Anchor;
    if (has_anchor) {
      if (auto f = anchor_postop_kernel(*n, &why)) out.factories[n] = *f;
      else out.fallbacks[n] = why;
      continue;
    }
    std::string symbol = fmt::format("gaf_{}_{}", c_identifier(n->op_type), index++);
    auto k = codegen::emit_kernel(*n, symbol, emit, &why);
    if (!k) {
      out.fallbacks[n] = why;
      continue;
    }
    out.kernels.push_back(std::move(*k));
    emitted_nodes.push_back(n);
  }
  if (out.kernels.empty()) return out;
  codegen::KernelUnits units = codegen::compile_kernels(out.kernels, compile);
  out.compile = units.stats;
  for (size_t u = 0; u < units.units.size(); ++u) {
    for (size_t i : units.units[u]) {
      const std::shared_ptr<Library>& lib = units.libraries[u];
      if (!lib) {
        out.fallbacks[emitted_nodes[i]] = units.errors[u];
        continue;
      }
      const KernelSignature& sig = out.kernels[i].sig;
      auto fn = reinterpret_cast<KernelFnPtr>(lib->find(sig.symbol));
      if (!fn) {
        out.fallbacks[emitted_nodes[i]] = "symbol " + sig.symbol + " missing from the compiled library";
        continue;
      }
      out.factories[emitted_nodes[i]] = [sig, fn, lib](const Node&) -> std::unique_ptr<Kernel> {
        return std::make_unique<GeneratedKernel>(sig, fn, lib);
      };
    }
  }
  return out;
}

}  // namespace gaf::runtime
