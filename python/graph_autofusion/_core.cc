// Python binding (pybind11): the library's fuse / Session / generate / explain / verify over numpy arrays.
// Models are paths or ONNX bytes; tensors cross as copies. Errors are RuntimeError carrying the tool's
// message.
#include <onnx/onnx_pb.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <utility>

#include "gaf/cuda.h"
#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/status.h"
#include "gaf/tools.h"

namespace py = pybind11;
using namespace gaf;

namespace {

// A model from a path (str) or from ONNX bytes (no external data then).
Model load(const py::object& model) {
  if (py::isinstance<py::bytes>(model)) {
    onnx::ModelProto proto;
    const std::string bytes = model.cast<std::string>();
    GAF_CHECK(proto.ParseFromString(bytes), "the bytes given are not a serialized ONNX model");
    Model m = onnx_io::import_model(std::move(proto));
    infer_fused_body_shapes(*m.graph);
    return m;
  }
  return tools::read_model(py::str(model).cast<std::string>());
}

tools::FuseOptions options(int opt_level, const std::optional<std::string>& rules,
                           const std::string& target) {
  tools::FuseOptions o;
  o.fusion.opt_level = opt_level;
  o.fusion.rules = FusionRules::from_env_or_file(rules.value_or(""));
  o.target = Target::builtin_or_file(target);
  return o;
}

// Element types that cross between numpy and tensors, by numpy's name.
constexpr std::pair<DType, const char*> kNumpyTypes[] = {
    {DType::Float, "float32"}, {DType::Double, "float64"}, {DType::Float16, "float16"},
    {DType::Int64, "int64"},   {DType::Int32, "int32"},    {DType::Int8, "int8"},
    {DType::UInt8, "uint8"},   {DType::Bool, "bool"}};

constexpr const char* kTensorCapsule = "graph_autofusion.Tensor";

// The tensor behind an array that to_numpy made, when `a` is that array as it was made (not a slice or a copy):
// a run's output fed back to a run (a present as the next past) crosses without a copy, and a KV cache view
// stays the view the session recognises.
const Tensor* own_tensor(const py::array& a) {
  const py::object base = a.base();
  if (!base || !PyCapsule_IsValid(base.ptr(), kTensorCapsule)) return nullptr;
  const auto* t = static_cast<const Tensor*>(PyCapsule_GetPointer(base.ptr(), kTensorCapsule));
  if (!t || a.data() != t->raw() || a.ndim() != t->rank()) return nullptr;
  const std::vector<int64_t> strides = t->strides();
  for (int i = 0; i < t->rank(); ++i)
    if (a.shape(i) != t->dim(i) || a.strides(i) != strides[size_t(i)] * py::ssize_t(dtype_size(t->dtype())))
      return nullptr;
  return t;
}

Tensor to_tensor(const std::string& name, const py::array& a) {
  if (const Tensor* own = own_tensor(a)) return *own;
  const std::string np = a.dtype().attr("name").cast<std::string>();
  const auto* it = std::find_if(std::begin(kNumpyTypes), std::end(kNumpyTypes),
                                [&](const auto& p) { return np == p.second; });
  if (it == std::end(kNumpyTypes))
    fail("input '{}': numpy dtype {} is not supported (float32/64, float16, int64/32/8, uint8, bool)", name,
         np);
  // Read in place (no copy): a C-contiguous array as it is, anything else after numpy makes it contiguous. The
  // tensor keeps the array alive; the last reference may go in a run that released the GIL, so it takes the GIL.
  py::array c = py::array::ensure(a, py::array::c_style);
  std::shared_ptr<void> owner(new py::object(c), [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  return Tensor::wrap(it->first, std::vector<int64_t>(c.shape(), c.shape() + c.ndim()),
                      const_cast<void*>(c.data()), std::move(owner));
}

// The output's own memory as a numpy array (no copy): the array keeps the tensor, and with it its storage, alive.
py::array to_numpy(const Tensor& t) {
  const auto* it = std::find_if(std::begin(kNumpyTypes), std::end(kNumpyTypes),
                                [&](const auto& p) { return t.dtype() == p.first; });
  if (it == std::end(kNumpyTypes))
    fail("an output of element type {} has no numpy form here", dtype_name(t.dtype()));
  auto* keep = new Tensor(t);
  py::capsule owner(keep, kTensorCapsule, [](PyObject* o) {
    delete static_cast<Tensor*>(PyCapsule_GetPointer(o, kTensorCapsule));
  });
  std::vector<py::ssize_t> dims(t.dims().begin(), t.dims().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(py::ssize_t(s * int64_t(dtype_size(t.dtype()))));
  return py::array(py::dtype(it->second), dims, strides, keep->raw(), owner);
}

// A run's value in Python: an array, a list of arrays for a sequence, None for an empty optional.
py::object to_python(const Tensor& t) {
  if (t.is_none()) return py::none();
  if (!t.is_sequence()) return to_numpy(t);
  py::list items;
  for (const Tensor& item : t.items()) items.append(to_numpy(item));
  return items;
}

// The value fed to input `v`: an array-like, or for a sequence input a list of them (of v's element type when
// empty), or None for an empty optional.
Tensor from_python(const Value* v, const std::string& name, const py::handle& x) {
  if (x.is_none()) return Tensor::none();
  const bool sequence =
      v && (v->type.kind == ValueKind::Sequence || v->type.kind == ValueKind::OptionalSequence);
  if (!sequence) return to_tensor(name, py::array::ensure(x));
  GAF_CHECK(py::isinstance<py::list>(x) || py::isinstance<py::tuple>(x),
            "input '{}' is {}: give a list of arrays", name, v->type.to_string());
  std::vector<Tensor> items;
  for (const py::handle& item : x) items.push_back(to_tensor(name, py::array::ensure(item)));
  const DType dtype = items.empty() ? v->type.dtype : items.front().dtype();
  return Tensor::sequence(dtype, std::move(items));
}

// Feeds (a dict by input name, or None) as the graph's required inputs in order; none given: seeded random
// ones.
std::vector<Tensor> inputs_for(const Graph& g, const py::object& feeds) {
  if (feeds.is_none()) return tools::random_inputs(g, 0);
  const py::dict d = feeds.cast<py::dict>();
  std::vector<Tensor> out;
  for (const Value* v : g.inputs()) {
    if (v->is_constant()) continue;
    GAF_CHECK(d.contains(v->name()), "inputs: '{}' is missing (the model takes {})", v->name(),
              g.inputs().size());
    out.push_back(from_python(v, v->name(), d[py::str(v->name())]));
  }
  return out;
}

// A model and a session over it (the session reads the model's graph): the CPU runtime's, or with
// device="cuda" the CUDA backend's (the model fused for the GPU).
class PySession {
 public:
  PySession(const py::object& model, int opt_level, const std::optional<std::string>& rules,
            const std::string& device, const std::optional<py::object>& max_memory, bool last_logits)
      : model_(std::make_unique<Model>(load(model))) {
    if (last_logits)
      if (std::string why = tools::keep_last_logits(*model_); !why.empty()) fail("last_logits=True: {}", why);
    runtime::SessionOptions session_options;
    if (max_memory && !max_memory->is_none()) {
      std::optional<size_t> bytes;
      if (py::isinstance<py::int_>(*max_memory)) {
        const auto v = max_memory->cast<long long>();
        if (v > 0) bytes = size_t(v);
      } else {
        bytes = runtime::parse_bytes(py::str(*max_memory).cast<std::string>());
      }
      GAF_CHECK(bytes, "max_memory={}: give bytes (an int) or a size such as '8G' or '512M'",
                py::repr(*max_memory).cast<std::string>());
      session_options.max_memory = *bytes;
    }
    if (device == "cuda") {
      if (std::string why = cuda::unavailable_reason(); !why.empty()) fail("device='cuda': {}", why);
      const tools::FuseOptions o = options(opt_level, rules, "cuda-h200");
      if (opt_level > 0) tools::fuse_model(*model_, o);
      else *model_ = tools::unfused_for_gpu(*model_);
      cuda::Options co;
      co.tf32 = o.fusion.rules.precision_mode == PrecisionMode::Tf32;
      cuda_ = std::make_unique<cuda::Session>(*model_->graph, co);
      return;
    }
    GAF_CHECK(device == "cpu", "device '{}': use 'cpu' or 'cuda'", device);
    if (opt_level > 0) tools::fuse_model(*model_, options(opt_level, rules, "cpu-host"));
    // The session owns the graph: a weight a kernel keeps packed is held once (runtime::Session's owning form).
    session_ = std::make_unique<runtime::Session>(std::move(model_->graph), session_options);
  }
  // The model's graph, in the CPU session once it owns it.
  const Graph& graph() const { return session_ ? session_->graph() : *model_->graph; }
  py::dict run(const py::dict& feeds) {
    std::map<std::string, Tensor> in;
    for (auto [k, v] : feeds) {
      const std::string name = py::str(k).cast<std::string>();
      in.emplace(name, from_python(graph().find_value(name), name, v));
    }
    std::vector<Tensor> out;
    if (cuda_) {  // the CUDA session takes the inputs in graph order
      std::vector<Tensor> ordered;
      for (const Value* v : required()) {
        auto it = in.find(v->name());
        GAF_CHECK(it != in.end(), "input '{}' is missing from the feeds", v->name());
        ordered.push_back(it->second);
      }
      py::gil_scoped_release release;
      out = cuda_->run(ordered);
    } else {
      py::gil_scoped_release release;
      out = session_->run(in);
    }
    py::dict r;
    const auto& outs = graph().outputs();
    for (size_t i = 0; i < out.size(); ++i) r[py::str(outs[i]->name())] = to_python(out[i]);
    return r;
  }
  // The graph inputs a run must be fed (those without an initializer).
  std::vector<const Value*> required() const {
    if (session_) return session_->required_inputs();
    std::vector<const Value*> r;
    for (const Value* v : graph().inputs())
      if (!v->is_constant()) r.push_back(v);
    return r;
  }
  std::vector<std::string> input_names() const {
    std::vector<std::string> n;
    for (const Value* v : required()) n.push_back(v->name());
    return n;
  }
  // Each required input's dims: a size, or the symbol's name for a dynamic dim (None when unknown).
  py::list input_shapes() const {
    py::list shapes;
    for (const Value* v : required()) {
      py::list dims;
      if (v->type.shape)
        for (const Dim& d : *v->type.shape) {
          if (d.is_static())
            dims.append(d.value());
          else if (d.is_symbol())
            dims.append(d.symbol());
          else
            dims.append(py::none());
        }
      shapes.append(dims);
    }
    return shapes;
  }
  std::vector<std::string> output_names() const {
    std::vector<std::string> n;
    for (const Value* v : graph().outputs()) n.push_back(v->name());
    return n;
  }
  py::dict generate(const std::vector<int64_t>& prompt, int tokens, int prefill_runs) {
    GAF_CHECK(session_, "generate runs on the CPU runtime; this session is on device='cuda'");
    tools::GenerateOptions g;
    g.prompt = prompt;
    g.tokens = tokens;
    GAF_CHECK(prefill_runs >= 0, "generate: prefill_runs must be >= 0 (got {})", prefill_runs);
    g.prefill_runs = prefill_runs;
    tools::GenerateResult r;
    {
      py::gil_scoped_release release;
      r = tools::generate(*session_, g);
    }
    py::dict d;
    d["ids"] = r.ids;
    d["prefill_ms"] = r.prefill_s * 1e3;
    d["prefill_warm_ms"] = r.median_prefill_warm_s() * 1e3;
    d["prefill_after_steps_ms"] = r.prefill_after_steps_s() * 1e3;
    d["tokens_per_s"] = r.tokens_per_s();
    d["median_step_ms"] = r.median_step_s() * 1e3;
    d["median_first32_ms"] = r.median_first_steps_s(32) * 1e3;
    d["median_last32_ms"] = r.median_last_steps_s(32) * 1e3;
    d["peak_rss_mb"] = double(r.peak_rss_bytes) / 1e6;
    d["rss_anon_mb"] = double(r.rss_anon_bytes) / 1e6;
    d["rss_file_mb"] = double(r.rss_file_bytes) / 1e6;
    d["kv_pairs"] = r.kv_pairs;
    d["kv_cache_mb"] = double(r.kv_cache_bytes) / 1e6;
    d["weights_mb"] = double(r.weights_bytes) / 1e6;
    d["weights_packed_only_mb"] = double(r.released_bytes) / 1e6;
    d["prefill_logits_rows"] = r.prefill_logits_rows;
    return d;
  }
  size_t generated_kernels() const { return session_ ? session_->generated_kernels() : cuda_->generated_kernels(); }
  py::list enable_kv_cache(int64_t capacity) {
    GAF_CHECK(session_, "enable_kv_cache runs on the CPU runtime; this session is on device='cuda'");
    py::list pairs;
    for (const runtime::KvCachePair& p : session_->enable_kv_cache(capacity)) pairs.append(py::make_tuple(p.past, p.present));
    return pairs;
  }

 private:
  std::unique_ptr<Model> model_;
  std::unique_ptr<runtime::Session> session_;
  std::unique_ptr<cuda::Session> cuda_;
};

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "graph-autofusion: fuses the operators of ONNX models and runs them (C++ core)";
  m.def(
      "fuse",
      [](const py::object& model, int opt_level, const std::optional<std::string>& rules,
         const std::string& target) {
        Model md = load(model);
        tools::FuseOptions o = options(opt_level, rules, target);
        tools::FuseResult r = tools::fuse_model(md, o);
        return py::make_tuple(py::bytes(onnx_io::serialize_model(PortableModel(md))),
                              r.report_json(md.graph->name, o.target, opt_level));
      },
      py::arg("model"), py::arg("opt_level") = 3, py::arg("rules") = py::none(),
      py::arg("target") = "cpu-host",
      "Fuses a model (path or ONNX bytes). Returns (fused ONNX bytes, report JSON text).");
  m.def(
      "explain",
      [](const py::object& model, int opt_level, const std::string& node) {
        Model md = load(model);
        tools::FuseResult r = tools::fuse_model(md, options(opt_level, std::nullopt, "cpu-host"));
        return tools::explain(r, node) + r.summary_line() + "\n";
      },
      py::arg("model"), py::arg("opt_level") = 3, py::arg("node") = "",
      "Why each candidate was or was not fused, and the near misses of pattern passes, as text.");
  m.def(
      "profile",
      [](const py::object& model, int opt_level, int iterations, int top, const py::object& feeds) {
        Model md = load(model);
        std::vector<Tensor> in = inputs_for(*md.graph, feeds);
        std::string text;
        {
          py::gil_scoped_release release;
          text = tools::profile_fusion(md, options(opt_level, std::nullopt, "cpu-host"), in, iterations, top);
        }
        return text;
      },
      py::arg("model"), py::arg("opt_level") = 3, py::arg("iterations") = 10, py::arg("top") = 15,
      py::arg("inputs") = py::none(),
      "Time per node, unfused and fused, on `inputs` (a dict by input name; seeded random ones when None): "
      "the "
      "profile table as text.");
  m.def(
      "verify",
      [](const py::object& model, int opt_level, double rtol, double atol, const py::object& feeds) {
        Model md = load(model);
        std::vector<Tensor> in = feeds.is_none() ? std::vector<Tensor>{} : inputs_for(*md.graph, feeds);
        tools::VerifyResult v =
            tools::verify_fusion(md, options(opt_level, std::nullopt, "cpu-host"), in, rtol, atol);
        py::dict d;
        d["ok"] = v.ok;
        d["text"] = v.text();
        return d;
      },
      py::arg("model"), py::arg("opt_level") = 3, py::arg("rtol") = 1e-3, py::arg("atol") = 1e-5,
      py::arg("inputs") = py::none(),
      "Fused against unfused on `inputs` (a dict by input name; seeded random ones when None): {'ok': bool, "
      "'text': the verify report}.");
  py::class_<PySession>(
      m, "Session",
      "A model fused in memory at opt_level, then compiled for the CPU runtime, or with "
      "device='cuda' for the GPU (static shapes). max_memory (bytes, or '8G', '512M'): a run "
      "that needs more (weights + intermediate tensors live at once) raises before it "
      "allocates; default: the memory the machine has available. last_logits=True: a decoder's "
      "'logits' only for the last position ([batch, 1, vocab]; what generate reads), the product "
      "that makes them skipping every other position; raises where the logits are not such a "
      "product.")
      .def(py::init<const py::object&, int, const std::optional<std::string>&, const std::string&,
                    const std::optional<py::object>&, bool>(),
           py::arg("model"), py::arg("opt_level") = 3, py::arg("rules") = py::none(),
           py::arg("device") = "cpu", py::arg("max_memory") = py::none(), py::arg("last_logits") = false)
      .def("run", &PySession::run, py::arg("feeds"),
           "Runs on {input name: numpy array}; returns {output name: array}. Outputs are the session's own "
           "memory (no copy); fed back to run as they are (a present as the next past), they cross without a "
           "copy too.")
      .def(
          "enable_kv_cache", &PySession::enable_kv_cache, py::arg("capacity"),
          "Keeps a decoder's keys and values in place, with room for `capacity` positions: each present "
          "output "
          "is a strided view of one buffer, and fed back as the next run's past it is read where it lies (no "
          "step copies the past). A present stays valid until a later run writes over its positions (feeding "
          "an older one rewinds). Returns the (past, present) input/output name pairs found.")
      .def_property_readonly("input_names", &PySession::input_names)
      .def_property_readonly("input_shapes", &PySession::input_shapes)
      .def_property_readonly("output_names", &PySession::output_names)
      .def_property_readonly("generated_kernels", &PySession::generated_kernels)
      .def("generate", &PySession::generate, py::arg("prompt"), py::arg("tokens") = 16, py::arg("prefill_runs") = 0,
           "Greedy decoding with a past/present decoder: {'ids', 'prefill_ms', 'tokens_per_s', ...}; "
           "prefill_runs: the prompt's prefill re-run that many times on the warm session after the loop, "
           "their median as 'prefill_warm_ms', the first (a new prompt right after the loop) as "
           "'prefill_after_steps_ms'.");
}
