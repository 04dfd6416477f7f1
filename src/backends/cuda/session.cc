// The CUDA backend's session: plans a graph onto the device once, then runs it (see include/gaf/cuda.h).
//
// Planning walks the nodes in order. Every value gets a Ref: a constant uploaded once, or an allocation of
// the arena; a Reshape-like node's output shares its input's allocation. Each node becomes a Step whose
// launch closure resolves Refs when it runs (so the arena can be laid out after the walk, from the
// allocations' lifetimes in steps). A fused node with an anchor (MatMul, Gemm, Conv) runs the anchor on its
// library with the leading bias / residual / ReLU of its epilogue folded into the library call, and the rest
// of the body as one generated kernel; a fused node without one is one generated kernel; a fused body the
// CUDA dialect cannot print runs node by node.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "backends/cuda/library_kernels.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/vendor.h"
#include "codegen/cuda/printer.h"
#include "gaf/codegen.h"
#include "gaf/cuda.h"
#include "gaf/op_registry.h"
#include "gaf/status.h"

namespace gaf::cuda {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA: {} failed: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}
void check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt: {} failed: status {}", what, int(e));
}
void check(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) fail("cuDNN: {} failed: {}", what, cudnn_api().cudnnGetErrorString(e));
}

constexpr size_t kAlign = 256;
constexpr size_t kWorkspace = size_t(64) << 20;  // cuBLASLt / cuDNN workspace, shared by the steps in turn
constexpr int kBlock = codegen::cuda::kBlockSize;
constexpr size_t kDefaultSharedBytes = 48 * 1024;  // dynamic shared memory a block gets without opting in  //
                                                   // every generated and library kernel but attention
void* const kDryPointer =
    reinterpret_cast<void*>(uintptr_t(256));  // a dry run's constants: never dereferenced

size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

struct Ref {
  int alloc = -1;            // arena allocation
  void* constant = nullptr;  // uploaded constant
  bool defined() const { return alloc >= 0 || constant; }
};

struct HostArgs {  // the CUDA prelude's GafArgs, sized by the same constants
  const void* in[codegen::cuda::kMaxInputs];
  void* out[codegen::cuda::kMaxOutputs];
  int64_t sym[codegen::cuda::kMaxSymbols];
};

// The operand types of the library products (cuBLASLt, cuDNN): fp32, or 16-bit storage with fp32 accumulation.
bool product_dtype(DType t) { return t == DType::Float || t == DType::BFloat16 || t == DType::Float16; }

bool is_alias_op(const Node& n) {
  static const std::set<std::string> ops = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return n.domain.empty() && ops.count(n.op_type) && n.num_outputs() == 1 && n.input(0) &&
         n.input(0)->type.dtype == n.output(0)->type.dtype;
}

}  // namespace

std::string unavailable_reason() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return fmt::format(
        "no CUDA device can be used here: {} ({}); --device cuda needs an NVIDIA GPU and its driver",
        cudaGetErrorString(e), cudaGetErrorName(e));
  if (count == 0) return "no CUDA device is present; --device cuda needs an NVIDIA GPU";
  return "";
}

struct Session::Impl {
  const Graph& g;
  Options opt;
  cudaDeviceProp prop{};
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  void* workspace = nullptr;

  struct Alloc {
    size_t bytes = 0;
    int first = 0, last = 0;
    size_t offset = 0;
  };
  std::vector<Alloc> allocs;
  std::vector<char*> alloc_ptr;
  char* arena = nullptr;
  size_t arena_size = 0;
  std::vector<void*> constants;
  std::map<const Value*, Ref> refs;

  struct StepImpl {
    std::function<void(cudaStream_t)> launch;
  };
  std::vector<StepImpl> exec;
  std::vector<Step> info;
  int step = 0;  // the step being planned

  // Generated kernels: all printed into one translation unit, compiled once, looked up by symbol.
  std::string kernels_source;
  std::deque<std::pair<std::string, cudaKernel_t>> kernels;
  cudaLibrary_t library = nullptr;
  size_t generated = 0;

  std::vector<Ref> input_refs, output_refs;
  std::vector<const Value*> inputs, outputs;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t graph_exec = nullptr;
  size_t graph_kernels = 0;
  std::string capture_error;
  std::vector<std::function<void()>> cleanup;
  // Kernels asking for more dynamic shared memory than a block gets by default: opted in once compiled.
  std::vector<std::pair<cudaKernel_t*, size_t>> large_shared;

  Impl(const Graph& graph_, Options o) : g(graph_), opt(o) {}
  ~Impl() {
    if (graph_exec) cudaGraphExecDestroy(graph_exec);
    if (graph) cudaGraphDestroy(graph);
    for (auto& f : cleanup) f();
    if (library) cudaLibraryUnload(library);
    for (void* p : constants) cudaFree(p);
    if (arena) cudaFree(arena);
    if (workspace) cudaFree(workspace);
    if (dnn) cudnn_api().cudnnDestroy(dnn);
    if (lt) cublaslt_api().cublasLtDestroy(lt);
    if (stream) cudaStreamDestroy(stream);
  }

  // ---- refs and lifetimes ----
  char* addr(const Ref& r) const {
    return r.constant ? static_cast<char*>(r.constant) : alloc_ptr[size_t(r.alloc)];
  }
  int new_alloc(size_t bytes) {
    allocs.push_back({std::max<size_t>(bytes, 1), step, step, 0});
    return int(allocs.size() - 1);
  }
  void touch(const Ref& r) {
    if (r.alloc >= 0) {
      Alloc& a = allocs[size_t(r.alloc)];
      a.first = std::min(a.first, step);
      a.last = std::max(a.last, step);
    }
  }
  size_t bytes_of(const Value* v, const Node& n) {
    return size_t(numel(static_dims(v, n))) * dtype_size(v->type.dtype);
  }
  // The Ref a node reads: its producer's, or the constant uploaded on first use.
  Ref in(const Value* v, const Node& n) {
    auto it = refs.find(v);
    if (it == refs.end()) {
      if (!v->is_constant()) fail("{}: input '{}' has no producer (CUDA plan)", n.describe(), v->name());
      if (opt.dry_run) return refs.emplace(v, Ref{-1, kDryPointer}).first->second;
      const Tensor& t = v->constant();
      void* p = nullptr;
      check(cudaMalloc(&p, std::max<size_t>(t.nbytes(), 1)), "cudaMalloc (constant)");
      constants.push_back(p);
      if (t.nbytes()) check(cudaMemcpy(p, t.raw(), t.nbytes(), cudaMemcpyHostToDevice), "copy of a constant");
      it = refs.emplace(v, Ref{-1, p}).first;
    }
    touch(it->second);
    return it->second;
  }
  // The Ref a node writes: preset (a fused node's output) or a fresh allocation.
  Ref out(const Value* v, const Node& n) {
    auto it = refs.find(v);
    if (it == refs.end()) it = refs.emplace(v, Ref{new_alloc(bytes_of(v, n)), nullptr}).first;
    touch(it->second);
    return it->second;
  }
  void add_step(const Node& n, std::string how, int launches, std::function<void(cudaStream_t)> f) {
    info.push_back({n.describe(), std::move(how), launches});
    exec.push_back({std::move(f)});
    ++step;
  }

  // ---- planning ----
  void plan() {
    for (const Value* v : g.inputs()) {
      if (v->is_constant()) continue;
      if (!v->type.has_static_shape())
        throw UnsupportedError(
            fmt::format("graph input '{}' has shape {}; the CUDA backend runs static shapes so "
                        "far",
                        v->name(), v->type.to_string()));
      Ref r{new_alloc(size_t(numel(v->type.static_dims())) * dtype_size(v->type.dtype)), nullptr};
      refs[v] = r;
      inputs.push_back(v);
      input_refs.push_back(r);
    }
    for (const Node* n : g.nodes()) plan_node(*n);
    for (const Value* v : g.outputs()) {
      auto it = refs.find(v);
      Ref r = it != refs.end() ? it->second : Ref{};
      if (!r.defined() && v->is_constant()) {
        Node dummy;
        r = in(v, dummy);
      }
      if (!r.defined()) fail("graph output '{}' is computed by no node", v->name());
      if (r.alloc >= 0) allocs[size_t(r.alloc)].last = INT_MAX;
      outputs.push_back(v);
      output_refs.push_back(r);
    }
    // Inputs live through the whole run: timing loops upload them once and replay many runs.
    for (const Ref& r : input_refs)
      allocs[size_t(r.alloc)].first = -1, allocs[size_t(r.alloc)].last = INT_MAX;
    layout_arena();
    compile_kernels();
  }

  void plan_node(const Node& n) {
    // A view of its input, unless its output must land in a buffer already given out (a fused node's output).
    if (is_alias_op(n) && !refs.count(n.output(0))) {
      refs[n.output(0)] = in(n.input(0), n);
      return;
    }
    if (n.domain == "gaf.fused" && n.body) return plan_fused(n);
    const std::string& op = n.op_type;
    if (n.domain.empty() && (op == "MatMul" || op == "Gemm")) return plan_matmul(n, {}, {}, nullptr);
    if (n.domain.empty() && op == "Conv") return plan_conv(n, {}, nullptr);
    if (n.domain == "gaf" && op == "Attention") return plan_attention(n);
    if (n.domain.empty() && (op == "MaxPool" || op == "AveragePool")) return plan_pool(n);
    if (n.domain.empty() && (op == "GlobalAveragePool" || op == "GlobalMaxPool")) return plan_global_pool(n);
    if (n.domain.empty() && op == "Gather") return plan_gather(n);
    std::string why;
    if (!plan_generated({&n}, &why))
      throw UnsupportedError(fmt::format(
          "{}: the CUDA backend has no kernel for it (BACKEND_UNSUPPORTED): {}", n.describe(), why));
  }

  // A fused node: its body's values take the node's Refs, then anchor + epilogue, or one kernel, or op by op.
  void plan_fused(const Node& f) {
    const Graph& body = *f.body;
    for (size_t i = 0; i < body.inputs().size(); ++i) refs[body.inputs()[i]] = in(f.input(int(i)), f);
    for (size_t o = 0; o < body.outputs().size(); ++o) {
      Ref r = out(f.output(int(o)), f);
      const Value* bv = body.outputs()[o];
      if (refs.count(bv)) fail("{}: body output '{}' is also a body input", f.describe(), bv->name());
      refs[bv] = r;
    }
    const std::vector<Node*> all = body.nodes();
    std::vector<const Node*> nodes(all.begin(), all.end());
    const Node* anchor = nullptr;
    for (const Node* n : nodes)
      if (n->domain.empty() && (n->op_type == "MatMul" || n->op_type == "Gemm" || n->op_type == "Conv")) {
        anchor = n;
        break;
      }
    if (!anchor || anchor != nodes.front()) {
      std::string why;
      if (plan_generated(nodes, &why)) return;
      for (const Node* n : nodes) plan_node(*n);
      return;
    }
    // The epilogue chain the library call takes: bias, residual, ReLU (in that order), each reading the value
    // before it and nothing the body computes.
    const Value* cur = anchor->output(0);
    size_t taken = 1;
    Chain chain;
    for (; taken < nodes.size(); ++taken) {
      const Node* n = nodes[taken];
      if (cur->uses().size() != 1 || cur->uses()[0].node != n || body.is_graph_output(cur)) break;
      if (!chain.extend(*anchor, *n, cur, body)) break;
      cur = n->output(0);
    }
    std::vector<const Node*> rest(nodes.begin() + long(taken), nodes.end());
    if (anchor->op_type == "Conv")
      plan_conv(*anchor, chain, cur);
    else
      plan_matmul(*anchor, chain, chain.residual, cur);
    if (rest.empty()) return;
    std::string why;
    if (plan_generated(rest, &why)) return;
    for (const Node* n : rest) plan_node(*n);
  }

  // What of an anchor's epilogue its library call computes.
  struct Chain {
    const Value* bias = nullptr;
    const Value* residual = nullptr;
    bool relu = false;
    bool extend(const Node& anchor, const Node& n, const Value* cur, const Graph& body) {
      if (!n.domain.empty() || relu) return false;
      auto outside = [&](const Value* v) { return v && (!v->producer() || v->producer()->graph() != &body); };
      if (n.op_type == "Relu") return relu = true;
      if (n.op_type != "Add" || n.num_inputs() != 2) return false;
      const Value* x = n.input(0) == cur ? n.input(1) : n.input(0);
      if (!outside(x) || x == cur || x->type.dtype != cur->type.dtype || !x->type.has_static_shape() ||
          !cur->type.has_static_shape())
        return false;
      std::vector<int64_t> xd = x->type.static_dims(), od = cur->type.static_dims();
      if (xd == od && !residual) return (residual = x), true;
      if (bias || residual) return false;
      bool has_bias_input = anchor.op_type != "MatMul" && anchor.input(2);
      if (has_bias_input) return false;
      if (anchor.op_type == "Conv") {  // [C, 1, 1] or [1, C, 1, 1]
        if (od.size() != 4 || xd.size() < 3 || xd.size() > 4 || numel(xd) != od[1] || xd.end()[-3] != od[1])
          return false;
      } else if (numel(xd) != od.back() || xd.back() != od.back()) {
        return false;
      }
      return (bias = x), true;
    }
  };

  // ---- generated kernels ----
  // Wraps `nodes` (of one graph, in order) into a fused node and prints it in the CUDA dialect: false with
  // *why when the dialect cannot. Externals read become the kernel's inputs; values read after the group (or
  // returned by its graph) its outputs.
  bool plan_generated(const std::vector<const Node*>& nodes, std::string* why) {
    std::vector<const Value*> ext_in, ext_out;
    const std::string symbol = fmt::format("gaf_k{}", kernels.size());
    codegen::EmitOptions eo;
    eo.dialect = codegen::Dialect::Cuda;
    std::optional<codegen::EmittedKernel> k =
        codegen::emit_group(nodes, *nodes.front()->graph(), symbol, eo, why, &ext_in, &ext_out);
    if (!k) return false;

    const Node& first = *nodes.front();
    std::vector<Ref> ins, outs;
    for (const Value* v : ext_in) ins.push_back(in(v, first));
    for (const Value* v : ext_out) outs.push_back(out(v, first));
    // Symbols and launch size from the static shapes.
    std::vector<int64_t> sym;
    for (auto [i, d] : k->sig.symbol_binds) sym.push_back(static_dims(ext_in[size_t(i)], first)[size_t(d)]);
    if (sym.size() > size_t(codegen::cuda::kMaxSymbols)) {
      *why = fmt::format("more than {} symbolic dims", codegen::cuda::kMaxSymbols);
      return false;
    }
    auto value = [&](const codegen::DimExpr& e) { return e.symbol >= 0 ? sym[size_t(e.symbol)] : e.value; };
    auto product = [&](const std::vector<codegen::DimExpr>& ds) {
      int64_t p = 1;
      for (const auto& e : ds) p *= value(e);
      return p;
    };
    const codegen::CudaLaunch& cl = k->sig.cuda;
    int64_t work = 0;
    size_t smem = 0;
    if (cl.rows) {
      work = product(cl.rows_dims);
      smem = size_t(cl.row_buffers) * size_t(product(cl.row_length)) * sizeof(float);
    } else {
      for (const auto& od : k->sig.output_dims) work = std::max(work, product(od));
      work = (work + kBlock - 1) / kBlock;
    }
    if (smem > size_t(prop.sharedMemPerBlockOptin)) {
      *why = fmt::format("its rows need {} bytes of shared memory; a block of this device gets {}", smem,
                         prop.sharedMemPerBlockOptin);
      return false;
    }
    kernels_source += k->source + "\n";
    kernels.emplace_back(symbol, nullptr);
    cudaKernel_t* handle = &kernels.back().second;
    if (smem > kDefaultSharedBytes) large_shared.emplace_back(handle, smem);
    const unsigned grid = unsigned(std::clamp<int64_t>(work, 1, int64_t(prop.multiProcessorCount) * 16));
    ++generated;
    std::string names;
    for (const Node* n : nodes) names += (names.empty() ? "" : ", ") + n->op_type;
    add_step(first, fmt::format("generated kernel {} ({})", symbol, names), 1,
             [this, ins, outs, sym, handle, grid, smem](cudaStream_t s) {
               HostArgs a{};
               for (size_t i = 0; i < ins.size(); ++i) a.in[i] = addr(ins[i]);
               for (size_t o = 0; o < outs.size(); ++o) a.out[o] = addr(outs[o]);
               for (size_t i = 0; i < sym.size(); ++i) a.sym[i] = sym[i];
               void* params[] = {&a};
               check(cudaLaunchKernel(reinterpret_cast<const void*>(*handle), dim3(grid), dim3(kBlock),
                                      params, smem, s),
                     "launch of a generated kernel");
             });
    return true;
  }

  void compile_kernels() {
    const std::string cubin = compile_cubin(
        codegen::cuda_prelude() + library_kernels_source() + kernels_source, prop.major, prop.minor);
    if (opt.dry_run) return;
    check(cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "cudaLibraryLoadData (generated kernels)");
    for (auto& [name, handle] : kernels)
      check(cudaLibraryGetKernel(&handle, library, name.c_str()), "cudaLibraryGetKernel");
    for (auto [handle, bytes] : large_shared)
      check(cudaFuncSetAttribute(reinterpret_cast<const void*>(*handle),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
            "opting a kernel in to more shared memory");
  }

  // A library kernel by name (compiled with the generated ones).
  cudaKernel_t* library_kernel(const std::string& name) {
    for (auto& [n, h] : kernels)
      if (n == name) return &h;
    kernels.emplace_back(name, nullptr);
    return &kernels.back().second;
  }

  // ---- products: cuBLASLt ----
  // Row-major C[M,N] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's A is our B and its B our
  // A.
  void plan_matmul(const Node& n, const Chain& chain, const Value* residual, const Value* result) {
    const bool gemm = n.op_type == "Gemm";
    const Value* a = n.input(0);
    const Value* b = n.input(1);
    std::vector<int64_t> ad = static_dims(a, n), bd = static_dims(b, n);
    const DType dt = a->type.dtype;
    if (!product_dtype(dt) || b->type.dtype != dt)
      throw UnsupportedError(fmt::format("{}: the CUDA backend multiplies float, bfloat16 or float16 matrices of one "
                                         "type, not {} x {} (BACKEND_UNSUPPORTED)",
                                         n.describe(), dtype_name(dt), dtype_name(b->type.dtype)));
    if (ad.size() == 1) ad.insert(ad.begin(), 1);
    if (bd.size() == 1) bd.push_back(1);
    bool ta = gemm && n.attr_int("transA", 0), tb = gemm && n.attr_int("transB", 0);
    const int64_t m = ta ? ad.end()[-1] : ad.end()[-2], k = ta ? ad.end()[-2] : ad.end()[-1];
    const int64_t nn = tb ? bd.end()[-2] : bd.end()[-1];
    std::vector<int64_t> alead(ad.begin(), ad.end() - 2), blead(bd.begin(), bd.end() - 2);
    const int64_t abatch = numel(alead), bbatch = numel(blead);
    int64_t batch = 1, mm = m, sa = 0, sb = 0;
    if (bbatch == 1) {
      mm = m * abatch;  // A's batch is contiguous rows
    } else if (abatch == bbatch && alead == blead) {
      batch = abatch, sa = m * k, sb = k * nn;
    } else if (abatch == 1) {
      batch = bbatch, sa = 0, sb = k * nn;
    } else {
      throw UnsupportedError(
          fmt::format("{}: batch dims {} x {} broadcast in a way the CUDA backend does not run", n.describe(),
                      fmt::join(alead, "x"), fmt::join(blead, "x")));
    }
    float alpha = gemm ? n.attr_float("alpha", 1.0f) : 1.0f, beta = 0.0f;
    const Value* bias = chain.bias;
    const Value* c = residual;
    if (gemm && n.input(2)) {
      const Value* cv = n.input(2);
      std::vector<int64_t> cd = static_dims(cv, n);
      const float gb = n.attr_float("beta", 1.0f);
      if (numel(cd) == nn && cd.back() == nn && gb == 1.0f)
        bias = cv;
      else if (numel(cd) == m * nn && !c)
        c = cv, beta = gb;
      else
        throw UnsupportedError(
            fmt::format("{}: C of shape {} is neither a bias row nor a full matrix for the CUDA "
                        "backend",
                        n.describe(), fmt::join(cd, "x")));
    }
    if (c && c == residual) beta = 1.0f;
    const Value* target = result ? result : n.output(0);
    for (const Value* v : std::initializer_list<const Value*>{bias, c, target})
      if (v && v->type.dtype != dt)
        throw UnsupportedError(fmt::format("{}: '{}' is {} where the product is {} (BACKEND_UNSUPPORTED)",
                                           n.describe(), v->name(), dtype_name(v->type.dtype), dtype_name(dt)));
    Ref ra = in(a, n), rb = in(b, n);
    Ref rbias = bias ? in(bias, n) : Ref{}, rc = c ? in(c, n) : Ref{};
    Ref rd = out(target, n);
    if (chain.bias && !bias) fail("internal: bias lost");

    std::string how =
        fmt::format("cuBLASLt {}{}x{}x{}{}{}{}{}", dt == DType::Float ? "" : std::string(dtype_name(dt)) + " ", mm,
                    nn, k, batch > 1 ? fmt::format(" batch {}", batch) : "",
                    bias ? " +bias" : "", c ? " +residual" : "", chain.relu ? " +relu" : "");
    if (opt.dry_run) {
      add_step(n, how + " (dry run)", 1, [](cudaStream_t) {});
      return;
    }
    // fp32 accumulation whatever the storage; TF32 products only on fp32 operands.
    cublasComputeType_t compute =
        opt.tf32 && dt == DType::Float ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cudaDataType_t ct = dt == DType::BFloat16 ? CUDA_R_16BF : dt == DType::Float16 ? CUDA_R_16F : CUDA_R_32F;
    cublasLtMatmulDesc_t desc;
    check(cublaslt_api().cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), "MatmulDescCreate");
    cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublaslt_api().cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)), "TRANSA");
    check(cublaslt_api().cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)), "TRANSB");
    cublasLtEpilogue_t epi = bias ? (chain.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                  : (chain.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    check(cublaslt_api().cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "EPILOGUE");
    auto layout = [&](int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
      cublasLtMatrixLayout_t l;
      check(cublaslt_api().cublasLtMatrixLayoutCreate(&l, ct, uint64_t(rows), uint64_t(cols), ld),
            "MatrixLayoutCreate");
      if (batch > 1) {
        int32_t count = int32_t(batch);
        check(cublaslt_api().cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
              "BATCH");
        check(cublaslt_api().cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                               sizeof(stride)),
              "STRIDE");
      }
      return l;
    };
    // cuBLASLt's A: our B, stored [K, N] (column-major N x K) or transposed [N, K] (K x N).
    cublasLtMatrixLayout_t la = tb ? layout(k, nn, k, sb) : layout(nn, k, nn, sb);
    cublasLtMatrixLayout_t lb = ta ? layout(mm, k, mm, sa) : layout(k, mm, k, sa);
    cublasLtMatrixLayout_t ld = layout(nn, mm, nn, mm * nn);
    cublasLtMatmulPreference_t pref;
    check(cublaslt_api().cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
    uint64_t ws = kWorkspace;
    check(
        cublaslt_api().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
        "WS");
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    check(cublaslt_api().cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &heur, &found),
          "AlgoGetHeuristic");
    cublaslt_api().cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0)
      throw UnsupportedError(fmt::format("{}: cuBLASLt has no algorithm for {}x{}x{} (batch {})",
                                         n.describe(), m, nn, k, batch));
    cleanup.push_back([desc, la, lb, ld] {
      cublaslt_api().cublasLtMatmulDescDestroy(desc);
      cublaslt_api().cublasLtMatrixLayoutDestroy(la);
      cublaslt_api().cublasLtMatrixLayoutDestroy(lb);
      cublaslt_api().cublasLtMatrixLayoutDestroy(ld);
    });
    cublasLtMatmulAlgo_t algo = heur.algo;
    add_step(n, how, 1,
             [this, desc, la, lb, ld, algo, ra, rb, rbias, rc, rd, alpha, beta, has_bias = bool(bias),
              has_c = bool(c)](cudaStream_t s) {
               if (has_bias) {
                 void* bp = addr(rbias);
                 check(
                     cublaslt_api().cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)),
                     "BIAS_POINTER");
               }
               void* d = addr(rd);
               const void* cp = has_c ? addr(rc) : d;
               check(cublaslt_api().cublasLtMatmul(lt, desc, &alpha, addr(rb), la, addr(ra), lb, &beta, cp, ld, d, ld, &algo,
                                    workspace, kWorkspace, s),
                     "cublasLtMatmul");
             });
  }

  // ---- convolutions: cuDNN ----
  void plan_conv(const Node& n, const Chain& chain, const Value* result) {
    const Value* x = n.input(0);
    const Value* w = n.input(1);
    std::vector<int64_t> xd = static_dims(x, n), wd = static_dims(w, n);
    const Value* target = result ? result : n.output(0);
    std::vector<int64_t> yd = static_dims(target, n);
    const DType dt = x->type.dtype;
    if (xd.size() != 4 || !product_dtype(dt) || w->type.dtype != dt || target->type.dtype != dt ||
        (n.input(2) && n.input(2)->type.dtype != dt) || (chain.bias && chain.bias->type.dtype != dt))
      throw UnsupportedError(fmt::format("{}: the CUDA backend runs 2-D convolutions (NCHW) on float, bfloat16 or "
                                         "float16 operands of one type",
                                         n.describe()));
    // Storage in dt, products accumulated in fp32 (cuDNN's pseudo-half / pseudo-bf16 configurations).
    const cudnnDataType_t ct =
        dt == DType::BFloat16 ? CUDNN_DATA_BFLOAT16 : dt == DType::Float16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0}), strides = n.attr_ints("strides", {1, 1}),
                         dil = n.attr_ints("dilations", {1, 1});
    const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID")
      throw UnsupportedError(fmt::format("{}: auto_pad {} on the CUDA backend", n.describe(), auto_pad));
    if (auto_pad == "VALID") pads = {0, 0, 0, 0};
    if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])
      throw UnsupportedError(fmt::format("{}: asymmetric pads [{}]: cuDNN pads both sides alike",
                                         n.describe(), fmt::join(pads, ",")));
    const int64_t groups = n.attr_int("group", 1);
    if (opt.dry_run) {
      in(x, n), in(w, n), out(target, n);
      if (chain.residual) in(chain.residual, n);
      add_step(
          n,
          fmt::format("cuDNN conv{}{}{}{}{}{} (dry run)",
                      dt == DType::Float ? "" : " " + std::string(dtype_name(dt)),
                      groups > 1 ? fmt::format(" groups {}", groups) : "",
                      dt != DType::Float && (n.input(2) || chain.bias || chain.residual || chain.relu)
                          ? ", then the conv epilogue kernel"
                          : "",
                      n.input(2) || chain.bias ? " +bias" : "", chain.residual ? " +residual" : "",
                      chain.relu ? " +relu" : ""),
          1, [](cudaStream_t) {});
      return;
    }
    cudnnTensorDescriptor_t xdsc, ydsc, bdsc;
    cudnnFilterDescriptor_t wdsc;
    cudnnConvolutionDescriptor_t cdsc;
    cudnnActivationDescriptor_t adsc;
    check(cudnn_api().cudnnCreateTensorDescriptor(&xdsc), "tensor descriptor");
    check(cudnn_api().cudnnCreateTensorDescriptor(&ydsc), "tensor descriptor");
    check(cudnn_api().cudnnCreateTensorDescriptor(&bdsc), "tensor descriptor");
    check(cudnn_api().cudnnCreateFilterDescriptor(&wdsc), "filter descriptor");
    check(cudnn_api().cudnnCreateConvolutionDescriptor(&cdsc), "convolution descriptor");
    check(cudnn_api().cudnnCreateActivationDescriptor(&adsc), "activation descriptor");
    cleanup.push_back([=] {
      cudnn_api().cudnnDestroyTensorDescriptor(xdsc);
      cudnn_api().cudnnDestroyTensorDescriptor(ydsc);
      cudnn_api().cudnnDestroyTensorDescriptor(bdsc);
      cudnn_api().cudnnDestroyFilterDescriptor(wdsc);
      cudnn_api().cudnnDestroyConvolutionDescriptor(cdsc);
      cudnn_api().cudnnDestroyActivationDescriptor(adsc);
    });
    auto i = [](int64_t v) { return int(v); };
    check(cudnn_api().cudnnSetTensor4dDescriptor(xdsc, CUDNN_TENSOR_NCHW, ct, i(xd[0]), i(xd[1]), i(xd[2]),
                                     i(xd[3])),
          "x descriptor");
    check(cudnn_api().cudnnSetTensor4dDescriptor(ydsc, CUDNN_TENSOR_NCHW, ct, i(yd[0]), i(yd[1]), i(yd[2]),
                                     i(yd[3])),
          "y descriptor");
    check(cudnn_api().cudnnSetTensor4dDescriptor(bdsc, CUDNN_TENSOR_NCHW, ct, 1, i(yd[1]), 1, 1),
          "bias descriptor");
    check(cudnn_api().cudnnSetFilter4dDescriptor(wdsc, ct, CUDNN_TENSOR_NCHW, i(wd[0]), i(wd[1]), i(wd[2]),
                                     i(wd[3])),
          "w descriptor");
    check(cudnn_api().cudnnSetConvolution2dDescriptor(cdsc, i(pads[0]), i(pads[1]), i(strides[0]), i(strides[1]),
                                          i(dil[0]), i(dil[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "convolution descriptor");
    check(cudnn_api().cudnnSetConvolutionGroupCount(cdsc, i(groups)), "group count");
    // Tensor cores for 16-bit operands, and for fp32 ones only under TF32.
    check(cudnn_api().cudnnSetConvolutionMathType(
              cdsc, opt.tf32 || dt != DType::Float ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
          "math type");
    check(cudnn_api().cudnnSetActivationDescriptor(adsc, chain.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                       CUDNN_PROPAGATE_NAN, 0.0),
          "activation");
    int returned = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[16];
    check(cudnn_api().cudnnGetConvolutionForwardAlgorithm_v7(dnn, xdsc, wdsc, cdsc, ydsc, 16, &returned, perf),
          "algorithm");
    // 16-bit operands: cudnnConvolutionForward (its pseudo-half / pseudo-bf16 configurations, fp32 accumulation)
    // and the bias / residual / ReLU as one kernel after it, since the fused call's 16-bit configurations are
    // not the same on every cuDNN. fp32: the fused call, whose identity activation runs only with the implicit
    // precomputed GEMM algorithm.
    const bool narrow = dt != DType::Float;
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    for (int k = 0; k < returned; ++k)
      if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= kWorkspace &&
          (narrow || chain.relu || perf[k].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)) {
        algo = perf[k].algo;
        break;
      }
    if (narrow) return plan_conv_16bit(n, chain, target, dt, xdsc, wdsc, cdsc, ydsc, algo);
    for (cudnnConvolutionFwdAlgo_t a : {algo, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM}) {
      size_t ws = 0;
      check(cudnn_api().cudnnGetConvolutionForwardWorkspaceSize(dnn, xdsc, wdsc, cdsc, ydsc, a, &ws), "workspace size");
      if (ws > kWorkspace)
        fail("{}: cuDNN wants {} bytes of workspace for algorithm {}", n.describe(), ws, int(a));
    }
    Ref rx = in(x, n), rw = in(w, n);
    const Value* bias = n.input(2) ? n.input(2) : chain.bias;
    Ref rb;
    if (bias) {
      rb = in(bias, n);
    } else {  // the fused call needs a bias: zeros
      void* p = nullptr;
      check(cudaMalloc(&p, size_t(yd[1]) * sizeof(float)), "cudaMalloc (zero bias)");
      check(cudaMemset(p, 0, size_t(yd[1]) * sizeof(float)), "cudaMemset");
      constants.push_back(p);
      rb.constant = p;
    }
    Ref rz = chain.residual ? in(chain.residual, n) : Ref{};
    Ref ry = out(target, n);
    std::string how = fmt::format("cuDNN conv{} algo {}{}{}{}",
                                  dt == DType::Float ? "" : " " + std::string(dtype_name(dt)), int(algo),
                                  groups > 1 ? fmt::format(" groups {}", groups) : "",
                                  chain.residual ? " +residual" : "", chain.relu ? " +relu" : "");
    // The fused call runs every algorithm with ReLU, and only the implicit precomputed GEMM with the
    // identity; a cuDNN that refuses the heuristic's choice at run time gets that one instead, once and for
    // all.
    auto chosen = std::make_shared<cudnnConvolutionFwdAlgo_t>(algo);
    add_step(n, how, 1, [=, this](cudaStream_t) {
      const float one = 1.0f, alpha2 = chain.residual ? 1.0f : 0.0f;
      void* y = addr(ry);
      auto call = [&] {
        return cudnn_api().cudnnConvolutionBiasActivationForward(
            dnn, &one, xdsc, addr(rx), wdsc, addr(rw), cdsc, *chosen, workspace, kWorkspace, &alpha2, ydsc,
            chain.residual ? addr(rz) : y, bdsc, addr(rb), adsc, ydsc, y);
      };
      cudnnStatus_t st = call();
      if (st == CUDNN_STATUS_NOT_SUPPORTED && *chosen != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
        *chosen = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
        st = call();
      }
      check(st, "cudnnConvolutionBiasActivationForward");
    });
  }

  // A 16-bit convolution (descriptors set up by plan_conv): the product by cudnnConvolutionForward, then the bias
  // (the node's or the chain's), the residual and ReLU in place by the library's epilogue kernel.
  void plan_conv_16bit(const Node& n, const Chain& chain, const Value* target, DType dt,
                       cudnnTensorDescriptor_t xdsc, cudnnFilterDescriptor_t wdsc, cudnnConvolutionDescriptor_t cdsc,
                       cudnnTensorDescriptor_t ydsc, cudnnConvolutionFwdAlgo_t algo) {
    size_t ws = 0;
    check(cudnn_api().cudnnGetConvolutionForwardWorkspaceSize(dnn, xdsc, wdsc, cdsc, ydsc, algo, &ws),
          "workspace size");
    if (ws > kWorkspace) fail("{}: cuDNN wants {} bytes of workspace for algorithm {}", n.describe(), ws, int(algo));
    const std::vector<int64_t> yd = static_dims(target, n);
    Ref rx = in(n.input(0), n), rw = in(n.input(1), n), ry = out(target, n);
    add_step(n, fmt::format("cuDNN conv {} algo {}", dtype_name(dt), int(algo)), 1, [=, this](cudaStream_t) {
      const float one = 1.0f, zero = 0.0f;
      check(cudnn_api().cudnnConvolutionForward(dnn, &one, xdsc, addr(rx), wdsc, addr(rw), cdsc, algo, workspace,
                                                kWorkspace, &zero, ydsc, addr(ry)),
            "cudnnConvolutionForward");
    });
    const Value* bias = n.input(2) ? n.input(2) : chain.bias;
    if (!bias && !chain.residual && !chain.relu) return;
    ConvEpilogueArgs a{};
    a.n = numel(yd);
    a.plane = yd[2] * yd[3];
    a.channels = yd[1];
    a.relu = chain.relu ? 1 : 0;
    a.half = dt == DType::Float16 ? 1 : 0;
    Ref rb = bias ? in(bias, n) : Ref{}, rz = chain.residual ? in(chain.residual, n) : Ref{};
    launch_library(n, "gaf_conv_epilogue16",
                   fmt::format("conv epilogue kernel{}{}{}", bias ? " +bias" : "", chain.residual ? " +residual" : "",
                               chain.relu ? " +relu" : ""),
                   (a.n + kBlock - 1) / kBlock, a, [=, this, has_bias = bias != nullptr,
                                                    has_z = chain.residual != nullptr](ConvEpilogueArgs& args) {
                     args.y = addr(ry);
                     args.bias = has_bias ? addr(rb) : nullptr;
                     args.z = has_z ? addr(rz) : nullptr;
                   });
  }

  // ---- attention ----
  void plan_attention(const Node& n) {
    int64_t nbatch = 1;
    const AttnArgs a = attention_args(n, &nbatch);
    const Value* mask = n.input(3);
    Ref rq = in(n.input(0), n), rk = in(n.input(1), n), rv = in(n.input(2), n);
    Ref rm = mask ? in(mask, n) : Ref{};
    Ref ro = out(n.output(0), n);
    const AttentionLaunch how = attention_launch(a);
    cudaKernel_t* kernel = library_kernel(how.kernel);
    const size_t smem = how.smem;
    const dim3 grid(unsigned((a.lq + how.rows_per_block - 1) / how.rows_per_block), unsigned(nbatch));
    if (smem > size_t(prop.sharedMemPerBlockOptin))
      throw UnsupportedError(
          fmt::format("{}: the attention kernel needs {} bytes of shared memory; a block of this "
                      "device gets {}",
                      n.describe(), smem, prop.sharedMemPerBlockOptin));
    if (smem > kDefaultSharedBytes) large_shared.emplace_back(kernel, smem);
    add_step(n,
             fmt::format("flash attention {}{} ({} x {} x {}, batch {}{})",
                         a.io == 0 ? "fp32" : a.io == 1 ? "bfloat16 I/O, fp32 math" : "float16 I/O, fp32 math",
                         how.tensor_cores ? ", tensor cores" : "", a.lq, a.lk, a.d, nbatch, mask ? ", mask" : ""),
             1, [=, this](cudaStream_t s) {
               AttnArgs args = a;
               args.q = addr(rq);
               args.k = addr(rk);
               args.v = addr(rv);
               args.mask = mask ? reinterpret_cast<const float*>(addr(rm)) : nullptr;
               args.o = addr(ro);
               void* params[] = {&args};
               check(
                   cudaLaunchKernel(reinterpret_cast<const void*>(*kernel), grid, dim3(128), params, smem, s),
                   "launch of the attention kernel");
             });
  }

  // ---- pooling, gather ----
  // A library kernel taking `args` by value; `bind(args)` fills in its data pointers at each launch.
  template <class Args, class Bind>
  void launch_library(const Node& n, const std::string& name, std::string how, int64_t work, const Args& args,
                      Bind bind) {
    cudaKernel_t* kernel = library_kernel(name);
    const unsigned grid = unsigned(std::clamp<int64_t>(work, 1, int64_t(prop.multiProcessorCount) * 16));
    add_step(n, std::move(how), 1, [=](cudaStream_t s) {
      Args a = args;
      bind(a);
      void* params[] = {&a};
      check(cudaLaunchKernel(reinterpret_cast<const void*>(*kernel), dim3(grid), dim3(kBlock), params, 0, s),
            "launch of a library kernel");
    });
  }

  void plan_pool(const Node& n) {
    const PoolArgs a = pool_args(n);
    Ref rx = in(n.input(0), n), ry = out(n.output(0), n);
    launch_library(n, "gaf_pool2d", fmt::format("pool kernel {}x{}", a.kh, a.kw),
                   (a.nc * a.oh * a.ow + kBlock - 1) / kBlock, a, [=, this](PoolArgs& args) {
                     args.x = addr(rx);
                     args.y = addr(ry);
                   });
  }

  void plan_global_pool(const Node& n) {
    const GlobalPoolArgs a = global_pool_args(n);
    Ref rx = in(n.input(0), n), ry = out(n.output(0), n);
    launch_library(n, "gaf_global_pool", "global pool kernel", (a.rows + 7) / 8, a,
                   [=, this](GlobalPoolArgs& args) {
                     args.x = addr(rx);
                     args.y = addr(ry);
                   });
  }

  void plan_gather(const Node& n) {
    const GatherArgs a = gather_args(n);
    Ref rd = in(n.input(0), n), ri = in(n.input(1), n), ry = out(n.output(0), n);
    launch_library(n, "gaf_gather", "gather kernel", (a.outer * a.nidx * a.len + kBlock - 1) / kBlock, a,
                   [=, this](GatherArgs& args) {
                     args.data = addr(rd);
                     args.idx = reinterpret_cast<const long long*>(addr(ri));
                     args.y = addr(ry);
                   });
  }

  // ---- arena ----
  // Greedy by size: each allocation at the lowest offset clear of every placed allocation alive at the same
  // time.
  void layout_arena() {
    std::vector<size_t> order(allocs.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return allocs[a].bytes > allocs[b].bytes; });
    std::vector<size_t> placed;
    for (size_t i : order) {
      Alloc& a = allocs[i];
      std::vector<std::pair<size_t, size_t>> busy;
      for (size_t j : placed) {
        const Alloc& b = allocs[j];
        if (b.first <= a.last && a.first <= b.last) busy.emplace_back(b.offset, b.offset + align_up(b.bytes));
      }
      std::sort(busy.begin(), busy.end());
      size_t off = 0;
      for (auto [lo, hi] : busy) {
        if (off + align_up(a.bytes) <= lo) break;
        off = std::max(off, hi);
      }
      a.offset = off;
      arena_size = std::max(arena_size, off + align_up(a.bytes));
      placed.push_back(i);
    }
    alloc_ptr.assign(allocs.size(), nullptr);
    if (opt.dry_run) return;
    check(cudaMalloc(&arena, std::max<size_t>(arena_size, 1)), "cudaMalloc (arena)");
    // NaN everywhere: an output some step fails to write shows up in verify instead of passing as stale data.
    check(cudaMemset(arena, 0xff, std::max<size_t>(arena_size, 1)), "cudaMemset (arena)");
    for (size_t i = 0; i < allocs.size(); ++i) alloc_ptr[i] = arena + allocs[i].offset;
  }

  void launch_all(cudaStream_t s) {
    for (auto& st : exec) st.launch(s);
  }

  // The schedule as one CUDA graph. A library call that refuses to be captured leaves the session without one
  // (runs launch step by step; capture_error says why) rather than failing it.
  void capture() {
    if (!opt.graph) return;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      launch_all(stream);
      check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
      check(cudaGraphInstantiate(&graph_exec, graph, 0), "cudaGraphInstantiate");
    } catch (const Error& e) {
      capture_error = e.what();
      cudaStreamCaptureStatus status;
      if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(stream, &broken);
        if (broken) cudaGraphDestroy(broken);
      }
      if (graph) cudaGraphDestroy(graph);
      graph = nullptr;
      graph_exec = nullptr;
      cudaGetLastError();
      return;
    }
    size_t count = 0;
    check(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes");
    std::vector<cudaGraphNode_t> nodes(count);
    if (count) check(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes");
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType t;
      check(cudaGraphNodeGetType(node, &t), "cudaGraphNodeGetType");
      graph_kernels += t == cudaGraphNodeTypeKernel;
    }
  }

  void upload(const std::vector<Tensor>& host) {
    GAF_CHECK(host.size() == inputs.size(), "the model takes {} inputs; {} were given", inputs.size(),
              host.size());
    for (size_t i = 0; i < host.size(); ++i) {
      const Value* v = inputs[i];
      GAF_CHECK(host[i].dtype() == v->type.dtype && host[i].dims() == v->type.static_dims(),
                "input '{}': expected {}, got {}[{}]", v->name(), v->type.to_string(),
                dtype_name(host[i].dtype()), fmt::join(host[i].dims(), ","));
      if (host[i].nbytes())
        check(cudaMemcpyAsync(addr(input_refs[i]), host[i].raw(), host[i].nbytes(), cudaMemcpyHostToDevice,
                              stream),
              "copy of an input to the device");
    }
  }

  void launch(bool replay) {
    if (replay && graph_exec)
      check(cudaGraphLaunch(graph_exec, stream), "cudaGraphLaunch");
    else
      launch_all(stream);
  }
};

Session::Session(const Graph& graph, Options options) : impl_(std::make_unique<Impl>(graph, options)) {
  Impl& m = *impl_;
  if (options.dry_run) {  // an H200's properties: the plan and the kernels it would compile
    std::snprintf(m.prop.name, sizeof(m.prop.name), "dry run (no device)");
    m.prop.major = 9, m.prop.minor = 0, m.prop.multiProcessorCount = 132,
    m.prop.sharedMemPerBlockOptin = 232448;
    m.opt.graph = false;
    m.plan();
    return;
  }
  if (std::string why = unavailable_reason(); !why.empty()) throw Error(why);
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaGetDeviceProperties(&m.prop, dev), "cudaGetDeviceProperties");
  check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublaslt_api().cublasLtCreate(&m.lt), "cublasLtCreate");
  check(cudnn_api().cudnnCreate(&m.dnn), "cudnnCreate");
  check(cudnn_api().cudnnSetStream(m.dnn, m.stream), "cudnnSetStream");
  check(cudaMalloc(&m.workspace, kWorkspace), "cudaMalloc (workspace)");
  m.plan();
  m.capture();
}

Session::~Session() = default;

std::vector<Tensor> Session::run(const std::vector<Tensor>& host_inputs) {
  Impl& m = *impl_;
  GAF_CHECK(!m.opt.dry_run, "a dry-run CUDA session plans and compiles; it cannot run");
  m.upload(host_inputs);
  m.launch(m.opt.graph);
  std::vector<Tensor> outs;
  for (size_t o = 0; o < m.outputs.size(); ++o) {
    const Value* v = m.outputs[o];
    Tensor t(v->type.dtype, v->type.static_dims());
    if (t.nbytes())
      check(cudaMemcpyAsync(t.raw(), m.addr(m.output_refs[o]), t.nbytes(), cudaMemcpyDeviceToHost, m.stream),
            "copy of an output to the host");
    outs.push_back(std::move(t));
  }
  check(cudaStreamSynchronize(m.stream), "the run on the device");
  return outs;
}

double Session::median_ms(const std::vector<Tensor>& host_inputs, int iterations, int warmup, bool replay) {
  Impl& m = *impl_;
  GAF_CHECK(!m.opt.dry_run, "a dry-run CUDA session plans and compiles; it cannot run");
  m.upload(host_inputs);
  for (int i = 0; i < warmup; ++i) m.launch(replay);
  check(cudaStreamSynchronize(m.stream), "warm-up runs");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    check(cudaEventRecord(a, m.stream), "cudaEventRecord");
    m.launch(replay);
    check(cudaEventRecord(b, m.stream), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms.empty() ? 0.0 : ms[ms.size() / 2];
}

std::vector<double> Session::step_ms(const std::vector<Tensor>& host_inputs, int iterations) {
  Impl& m = *impl_;
  GAF_CHECK(!m.opt.dry_run, "a dry-run CUDA session plans and compiles; it cannot run");
  m.upload(host_inputs);
  m.launch(false);  // warm-up
  const size_t n = m.exec.size();
  std::vector<cudaEvent_t> ev(n + 1);
  for (auto& e : ev) check(cudaEventCreate(&e), "cudaEventCreate");
  std::vector<std::vector<double>> times(n);
  for (int it = 0; it < iterations; ++it) {
    check(cudaEventRecord(ev[0], m.stream), "cudaEventRecord");
    for (size_t i = 0; i < n; ++i) {
      m.exec[i].launch(m.stream);
      check(cudaEventRecord(ev[i + 1], m.stream), "cudaEventRecord");
    }
    check(cudaEventSynchronize(ev[n]), "cudaEventSynchronize");
    for (size_t i = 0; i < n; ++i) {
      float t = 0;
      check(cudaEventElapsedTime(&t, ev[i], ev[i + 1]), "cudaEventElapsedTime");
      times[i].push_back(t);
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::vector<double> med(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    if (times[i].empty()) continue;
    std::sort(times[i].begin(), times[i].end());
    med[i] = times[i][times[i].size() / 2];
  }
  return med;
}

const std::vector<Step>& Session::steps() const { return impl_->info; }
size_t Session::kernels_per_run() const {
  if (impl_->graph_exec) return impl_->graph_kernels;
  size_t n = 0;
  for (const Step& s : impl_->info) n += size_t(s.launches);
  return n;
}
size_t Session::generated_kernels() const { return impl_->generated; }
std::string Session::device_name() const {
  return fmt::format("{} (sm_{}{})", impl_->prop.name, impl_->prop.major, impl_->prop.minor);
}
size_t Session::arena_bytes() const { return impl_->arena_size; }
const std::string& Session::capture_error() const { return impl_->capture_error; }

}  // namespace gaf::cuda
