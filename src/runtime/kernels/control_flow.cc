// If, Loop, Scan and SequenceMap. A node's subgraphs (GraphAttr) run in Sessions of their own, built once
// with the node's kernel, so a subgraph's fused groups are generated kernels like the main graph's. Each run
// of a subgraph takes its formal inputs and then its captures: the node's implicit inputs, the values of
// enclosing graphs it reads.
#include "gaf/session.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/families.h"

namespace gaf::runtime {

namespace {

// One subgraph attribute of a node and the session that runs it.
class Subgraph {
 public:
  Subgraph(const Node& n, const std::string& attr) : attr_(attr), graph_(n.subgraph(attr)) {
    formal_ = int(graph_->inputs().size()) - n.implicit_inputs;
    GAF_CHECK(formal_ >= 0, "{}: subgraph '{}' has fewer inputs than the node's {} captures", n.describe(),
              attr, n.implicit_inputs);
    try {
      session_ = std::make_unique<Session>(*graph_);
    } catch (const UnsupportedError& e) {
      unsupported("{}, subgraph '{}': {}", n.describe(), attr, e.what());
    } catch (const Error& e) {
      fail("{}, subgraph '{}': {}", n.describe(), attr, e.what());
    }
  }

  int formal_inputs() const { return formal_; }
  int num_outputs() const { return int(graph_->outputs().size()); }
  const Value& input(int i) const { return *graph_->inputs()[size_t(i)]; }
  const Value& output(int i) const { return *graph_->outputs()[size_t(i)]; }
  const std::string& attr() const { return attr_; }
  const Session* session() const { return session_.get(); }

  // Runs the subgraph on `formal` followed by the node's captures.
  std::vector<Tensor> run(const KernelContext& ctx, std::vector<Tensor> formal) {
    GAF_ASSERT(int(formal.size()) == formal_, "subgraph fed the wrong number of inputs");
    for (int k = 0; k < ctx.node().implicit_inputs; ++k)
      formal.push_back(ctx.in(ctx.node().num_explicit_inputs() + k));
    return session_->run(formal);
  }

 private:
  std::string attr_;
  std::shared_ptr<const Graph> graph_;
  int formal_ = 0;
  std::unique_ptr<Session> session_;
};

bool truth(const Tensor& t, const Node& n, const char* what) {
  GAF_CHECK(t.numel() == 1, "{}: {} has {} elements; it must hold one", n.describe(), what, t.numel());
  return t.get_double(0) != 0;
}

// A scalar for a subgraph input declared as a scalar or as a one-element vector (exporters write either).
template <class T>
Tensor scalar_for(const Value& input, T v) {
  Tensor t = Tensor::scalar(v);
  if (input.type.shape && input.type.shape->size() == 1) t = t.reshaped({1});
  return t;
}

// `t` with dim `axis` removed at index i: a contiguous copy.
Tensor slice_along(const Tensor& t, int axis, int64_t i, Allocator& alloc, const Node& n) {
  if (t.dtype() == DType::String) unsupported("{}: scanning a string tensor is not supported", n.describe());
  std::vector<int64_t> dims = t.dims(), strides = t.strides();
  const int64_t offset = i * strides[size_t(axis)];
  dims.erase(dims.begin() + axis);
  strides.erase(strides.begin() + axis);
  return Tensor::view(t, dims, strides, offset).clone(alloc);
}

// The dims of `slices` stacked along a new axis `axis`; when there are none, the subgraph output's declared
// dims (unknown ones as 0, no elements either way).
std::vector<int64_t> stacked_dims(const std::vector<Tensor>& slices, const Value& declared, int64_t& axis,
                                  const Node& n) {
  std::vector<int64_t> dims;
  if (!slices.empty()) {
    dims = slices.front().dims();
    for (size_t i = 1; i < slices.size(); ++i)
      GAF_CHECK(
          slices[i].dims() == dims && slices[i].dtype() == slices.front().dtype(),
          "{}: scan output '{}' is {}{} at iteration {} but {}{} at the first; a scan output keeps its type "
          "and shape from one iteration to the next",
          n.describe(), declared.name(), dtype_name(slices[i].dtype()), dims_to_string(slices[i].dims()), i,
          dtype_name(slices.front().dtype()), dims_to_string(dims));
  } else if (declared.type.shape) {
    for (const Dim& d : *declared.type.shape) dims.push_back(d.is_static() ? d.value() : 0);
  }
  axis = normalize_axis(axis, int(dims.size()) + 1, n);
  dims.insert(dims.begin() + axis, int64_t(slices.size()));
  return dims;
}

// Writes `slices` into `out`, their stack along its dim `axis` (in reverse order when `reverse`).
void fill_stacked(Tensor& out, const std::vector<Tensor>& slices, int64_t axis, bool reverse, const Node& n) {
  if (slices.empty()) return;
  if (out.dtype() == DType::String) unsupported("{}: a string scan output is not supported", n.describe());
  std::vector<int64_t> strides = out.strides();
  const int64_t step = strides[size_t(axis)];
  strides.erase(strides.begin() + axis);
  for (size_t i = 0; i < slices.size(); ++i) {
    const Tensor& s = slices[reverse ? slices.size() - 1 - i : i];
    Tensor::view(out, s.dims(), strides, int64_t(i) * step).copy_from(s);
  }
}

// Output `index` of ctx: `slices` stacked along a new axis (in reverse order when `reverse`).
void stack_output(KernelContext& ctx, int index, const std::vector<Tensor>& slices, const Value& declared,
                  int64_t axis, bool reverse) {
  std::vector<int64_t> dims = stacked_dims(slices, declared, axis, ctx.node());
  const DType dtype = slices.empty() ? declared.type.dtype : slices.front().dtype();
  fill_stacked(ctx.allocate_output(index, dtype, dims), slices, axis, reverse, ctx.node());
}

class IfKernel final : public Kernel {
 public:
  std::vector<const Session*> subgraph_sessions() const override {
    return {then_.session(), else_.session()};
  }
  explicit IfKernel(const Node& n) : then_(n, "then_branch"), else_(n, "else_branch") {
    for (const Subgraph* b : {&then_, &else_})
      GAF_CHECK(
          b->num_outputs() == n.num_outputs() && b->formal_inputs() == 0,
          "{}: branch '{}' takes {} inputs and returns {} values; an If with {} outputs needs branches of no "
          "inputs returning {}",
          n.describe(), b->attr(), b->formal_inputs(), b->num_outputs(), n.num_outputs(), n.num_outputs());
  }
  void run(KernelContext& ctx) override {
    Subgraph& branch = truth(ctx.in(0), ctx.node(), "the condition") ? then_ : else_;
    std::vector<Tensor> outs = branch.run(ctx, {});
    for (size_t i = 0; i < outs.size(); ++i) ctx.set_output(int(i), std::move(outs[i]));
  }

 private:
  Subgraph then_, else_;
};

// Loop(M, cond, v_initial...): while (no M or i < M) and (no cond or cond), the body maps (i, cond, v...) to
// (cond, v..., scan...); the outputs are the final v... and each scan value stacked over the iterations.
// Without a condition input the body's condition output is ignored (ONNX's "for loop").
class LoopKernel final : public Kernel {
 public:
  std::vector<const Session*> subgraph_sessions() const override { return {body_.session()}; }
  explicit LoopKernel(const Node& n) : body_(n, "body") {
    carried_ = n.num_explicit_inputs() - 2;
    GAF_CHECK(carried_ >= 0,
              "{}: Loop takes a trip count and a condition (either may be \"\") before its "
              "loop-carried values; it has {} inputs",
              n.describe(), n.num_explicit_inputs());
    scans_ = body_.num_outputs() - 1 - carried_;
    GAF_CHECK(
        body_.formal_inputs() == 2 + carried_ && scans_ >= 0 && n.num_outputs() == carried_ + scans_,
        "{}: with {} loop-carried values the body takes {} inputs (it takes {}) and returns the condition, "
        "the values and the node's {} scan outputs (it returns {} values)",
        n.describe(), carried_, 2 + carried_, body_.formal_inputs(), n.num_outputs() - carried_,
        body_.num_outputs());
    GAF_CHECK(
        n.input(0) || n.input(1),
        "{}: the Loop has neither a trip count (input 0) nor a condition (input 1), so it would never end; "
        "give it one",
        n.describe());
  }
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const Tensor* trips = ctx.input(0);
    const Tensor* cond_in = ctx.input(1);
    int64_t max_trips = 0;
    if (trips) {
      GAF_CHECK(trips->numel() == 1, "{}: the trip count has {} elements; it must hold one", n.describe(),
                trips->numel());
      max_trips = trips->get_int(0);
    }
    bool cond = cond_in ? truth(*cond_in, n, "the condition input") : true;
    std::vector<Tensor> carried;
    for (int i = 0; i < carried_; ++i) carried.push_back(ctx.in(2 + i));
    std::vector<std::vector<Tensor>> scans(static_cast<size_t>(scans_));
    for (int64_t i = 0; (!trips || i < max_trips) && cond; ++i) {
      std::vector<Tensor> formal{scalar_for(body_.input(0), int64_t(i)), scalar_for(body_.input(1), cond)};
      for (Tensor& v : carried) formal.push_back(std::move(v));
      std::vector<Tensor> outs = body_.run(ctx, std::move(formal));
      if (cond_in) cond = truth(outs[0], n, "the body's condition output");
      for (int k = 0; k < carried_; ++k) carried[size_t(k)] = std::move(outs[size_t(1 + k)]);
      for (int k = 0; k < scans_; ++k) scans[size_t(k)].push_back(std::move(outs[size_t(1 + carried_ + k)]));
    }
    for (int k = 0; k < carried_; ++k) ctx.set_output(k, std::move(carried[size_t(k)]));
    for (int k = 0; k < scans_; ++k)
      stack_output(ctx, carried_ + k, scans[size_t(k)], body_.output(1 + carried_ + k), 0, false);
  }

 private:
  Subgraph body_;
  int carried_ = 0, scans_ = 0;
};

// Scan: the body maps (state..., one slice of each scan input...) to (state..., one slice of each scan
// output...), over the scan inputs' common length. Opset 9 on: inputs (state..., scan...), with axes and
// directions per scan input and output. Opset 8: inputs (sequence_lens, state..., scan...) all with a leading
// batch dim, scanned along dim 1, each batch entry on its own (scan outputs padded with zeros past its
// length).
class ScanKernel final : public Kernel {
 public:
  std::vector<const Session*> subgraph_sessions() const override { return {body_.session()}; }
  explicit ScanKernel(const Node& n) : body_(n, "body"), batched_(n.opset > 0 && n.opset < 9) {
    const int first = batched_ ? 1 : 0;
    scan_inputs_ = int(n.attr_int("num_scan_inputs"));
    states_ = n.num_explicit_inputs() - first - scan_inputs_;
    scan_outputs_ = n.num_outputs() - states_;
    GAF_CHECK(
        scan_inputs_ >= 1 && states_ >= 0 && scan_outputs_ >= 0 &&
            body_.formal_inputs() == states_ + scan_inputs_ && body_.num_outputs() == n.num_outputs(),
        "{}: with {} scan inputs among its {} inputs the body takes {} inputs (it takes {}) and returns {} "
        "values (it returns {})",
        n.describe(), scan_inputs_, n.num_explicit_inputs(), states_ + scan_inputs_, body_.formal_inputs(),
        n.num_outputs(), body_.num_outputs());
    in_axes_ = n.attr_ints("scan_input_axes", std::vector<int64_t>(size_t(scan_inputs_), 0));
    in_reverse_ = n.attr_ints(batched_ ? "directions" : "scan_input_directions",
                              std::vector<int64_t>(size_t(scan_inputs_), 0));
    out_axes_ = n.attr_ints("scan_output_axes", std::vector<int64_t>(size_t(scan_outputs_), 0));
    out_reverse_ = n.attr_ints("scan_output_directions", std::vector<int64_t>(size_t(scan_outputs_), 0));
    GAF_CHECK(in_axes_.size() == size_t(scan_inputs_) && in_reverse_.size() == size_t(scan_inputs_) &&
                  out_axes_.size() == size_t(scan_outputs_) && out_reverse_.size() == size_t(scan_outputs_),
              "{}: the axes and directions attributes need one entry per scan input ({}) and output ({})",
              n.describe(), scan_inputs_, scan_outputs_);
  }

  void run(KernelContext& ctx) override {
    const int first = batched_ ? 1 : 0;
    std::vector<Tensor> states, scanned;
    for (int i = 0; i < states_; ++i) states.push_back(ctx.in(first + i));
    for (int j = 0; j < scan_inputs_; ++j) scanned.push_back(ctx.in(first + states_ + j));
    if (!batched_) {
      std::vector<int> axes;
      for (int j = 0; j < scan_inputs_; ++j)
        axes.push_back(normalize_axis(in_axes_[size_t(j)], scanned[size_t(j)].rank(), ctx.node()));
      Sweep r = sweep(ctx, std::move(states), scanned, axes, -1);
      for (int i = 0; i < states_; ++i) ctx.set_output(i, std::move(r.states[size_t(i)]));
      for (int k = 0; k < scan_outputs_; ++k)
        stack_output(ctx, states_ + k, r.slices[size_t(k)], body_.output(states_ + k), out_axes_[size_t(k)],
                     out_reverse_[size_t(k)] != 0);
      return;
    }
    run_batched(ctx, std::move(states), scanned);
  }

 private:
  struct Sweep {
    std::vector<Tensor> states;
    std::vector<std::vector<Tensor>> slices;  // per scan output, in iteration order
  };

  // Runs the body over the scan inputs along `axes` (their common length, or `length` when >= 0).
  Sweep sweep(KernelContext& ctx, std::vector<Tensor> states, const std::vector<Tensor>& scanned,
              const std::vector<int>& axes, int64_t length) {
    const Node& n = ctx.node();
    int64_t common = -1;
    for (int j = 0; j < scan_inputs_; ++j) {
      const int64_t len = scanned[size_t(j)].dims()[size_t(axes[size_t(j)])];
      GAF_CHECK(common < 0 || len == common,
                "{}: scan input {} has length {} along its scan axis, the first has {}; they must agree",
                n.describe(), j, len, common);
      common = len;
    }
    if (length < 0) length = common;
    Sweep r{std::move(states), std::vector<std::vector<Tensor>>(size_t(scan_outputs_))};
    for (int64_t t = 0; t < length; ++t) {
      std::vector<Tensor> formal = std::move(r.states);
      for (int j = 0; j < scan_inputs_; ++j) {
        const int64_t at = in_reverse_[size_t(j)] ? length - 1 - t : t;
        formal.push_back(slice_along(scanned[size_t(j)], axes[size_t(j)], at, ctx.allocator(), n));
      }
      std::vector<Tensor> outs = body_.run(ctx, std::move(formal));
      r.states.assign(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.begin() + states_));
      for (int k = 0; k < scan_outputs_; ++k)
        r.slices[size_t(k)].push_back(std::move(outs[size_t(states_ + k)]));
    }
    return r;
  }

  void run_batched(KernelContext& ctx, std::vector<Tensor> states, const std::vector<Tensor>& scanned) {
    const Node& n = ctx.node();
    for (const Tensor& s : scanned)
      GAF_CHECK(s.rank() >= 2, "{}: a scan input of opset 8 is [batch, sequence, ...]; one is {}",
                n.describe(), dims_to_string(s.dims()));
    const int64_t batch = scanned.front().dims()[0], seq = scanned.front().dims()[1];
    for (const Tensor& s : states)
      GAF_CHECK(s.rank() >= 1 && s.dims()[0] == batch,
                "{}: a state is {}; its first dim must be the batch, {}", n.describe(),
                dims_to_string(s.dims()), batch);
    const Tensor* lens = ctx.input(0);
    GAF_CHECK(!lens || lens->numel() == batch, "{}: sequence_lens has {} entries for a batch of {}",
              n.describe(), lens ? lens->numel() : 0, batch);
    std::vector<std::vector<Tensor>> final_states(static_cast<size_t>(states_));
    std::vector<std::vector<Tensor>> outputs(
        static_cast<size_t>(scan_outputs_));  // per output, per batch entry: [seq, ...]
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t len = lens ? lens->get_int(b) : seq;
      GAF_CHECK(len >= 0 && len <= seq, "{}: sequence_lens[{}] is {}, outside [0, {}]", n.describe(), b, len,
                seq);
      std::vector<Tensor> st, sc;
      for (const Tensor& s : states) st.push_back(slice_along(s, 0, b, ctx.allocator(), n));
      for (const Tensor& s : scanned) sc.push_back(slice_along(s, 0, b, ctx.allocator(), n));
      Sweep r = sweep(ctx, std::move(st), sc, std::vector<int>(size_t(scan_inputs_), 0), len);
      for (int i = 0; i < states_; ++i) final_states[size_t(i)].push_back(std::move(r.states[size_t(i)]));
      for (int k = 0; k < scan_outputs_; ++k) {
        std::vector<Tensor>& slices = r.slices[size_t(k)];
        GAF_CHECK(!slices.empty() || seq == 0,
                  "{}: batch entry {} has length 0; opset 8 Scan outputs need one "
                  "iteration to know their shape",
                  n.describe(), b);
        if (slices.empty()) continue;
        while (int64_t(slices.size()) < seq) {  // past this entry's length: zeros
          Tensor z(slices.front().dtype(), slices.front().dims(), ctx.allocator(), true);
          slices.push_back(std::move(z));
        }
        std::vector<int64_t> dims = slices.front().dims();
        dims.insert(dims.begin(), seq);
        Tensor stacked(slices.front().dtype(), dims, ctx.allocator());
        fill_stacked(stacked, slices, 0, false, n);
        outputs[size_t(k)].push_back(std::move(stacked));
      }
    }
    for (int i = 0; i < states_; ++i)
      stack_output(ctx, i, final_states[size_t(i)], body_.output(i), 0, false);
    for (int k = 0; k < scan_outputs_; ++k)
      stack_output(ctx, states_ + k, outputs[size_t(k)], body_.output(states_ + k), 0, false);
  }

  Subgraph body_;
  bool batched_;
  int scan_inputs_ = 0, states_ = 0, scan_outputs_ = 0;
  std::vector<int64_t> in_axes_, in_reverse_, out_axes_, out_reverse_;
};

// SequenceMap(input_sequence, additional_inputs...): the body runs once per item of the input sequence, fed
// the i-th item of every sequence input (all of one length) and every tensor input as it is; each body output
// becomes a sequence of its per-item values.
class SequenceMapKernel final : public Kernel {
 public:
  std::vector<const Session*> subgraph_sessions() const override { return {body_.session()}; }
  explicit SequenceMapKernel(const Node& n) : body_(n, "body") {
    GAF_CHECK(body_.formal_inputs() == n.num_explicit_inputs() && body_.num_outputs() == n.num_outputs(),
              "{}: the body takes {} inputs and returns {} values; the node has {} inputs and {} outputs",
              n.describe(), body_.formal_inputs(), body_.num_outputs(), n.num_explicit_inputs(),
              n.num_outputs());
  }
  void run(KernelContext& ctx) override {
    const Node& n = ctx.node();
    const int inputs = n.num_explicit_inputs();
    const Tensor& first = ctx.in(0);
    GAF_CHECK(first.is_sequence(), "{}: input 0 must be a sequence", n.describe());
    const size_t length = first.items().size();
    for (int j = 1; j < inputs; ++j) {
      const Tensor& t = ctx.in(j);
      GAF_CHECK(!t.is_none(), "{}: input {} is an empty optional", n.describe(), j);
      GAF_CHECK(!t.is_sequence() || t.items().size() == length,
                "{}: input {} is a sequence of {} tensors, input 0 of {}; they must agree", n.describe(), j,
                t.is_sequence() ? t.items().size() : 0, length);
    }
    std::vector<std::vector<Tensor>> results(size_t(n.num_outputs()));
    for (size_t i = 0; i < length; ++i) {
      std::vector<Tensor> formal;
      for (int j = 0; j < inputs; ++j) {
        const Tensor& t = ctx.in(j);
        formal.push_back(t.is_sequence() ? t.items()[i] : t);
      }
      std::vector<Tensor> outs = body_.run(ctx, std::move(formal));
      for (size_t k = 0; k < outs.size(); ++k) results[k].push_back(std::move(outs[k]));
    }
    for (int k = 0; k < n.num_outputs(); ++k) {
      std::vector<Tensor>& items = results[size_t(k)];
      const DType dtype = items.empty() ? body_.output(k).type.dtype : items.front().dtype();
      ctx.set_output(k, Tensor::sequence(dtype, std::move(items)));
    }
  }

 private:
  Subgraph body_;
};

template <class K>
KernelFactory make() {
  return [](const Node& n) -> std::unique_ptr<Kernel> { return std::make_unique<K>(n); };
}

}  // namespace

void register_control_flow_ops(KernelRegistry& r) {
  r.add("If").set_kernel(make<IfKernel>());
  r.add("Loop").set_kernel(make<LoopKernel>());
  r.add("Scan").set_kernel(make<ScanKernel>());
  r.add("SequenceMap").set_kernel(make<SequenceMapKernel>());
}

}  // namespace gaf::runtime
