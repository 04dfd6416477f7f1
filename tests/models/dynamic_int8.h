// ONNX Runtime's own int8 form of a model, for bench/llm's comparison of int8 decoding: what
// onnxruntime.quantization.quantize_dynamic writes with per_channel=True and weight_type=QInt8. Each MatMul whose
// B is a constant fp32 [K, N] initializer of at least 64K elements becomes
//
//   A_q, A_scale, A_zp = DynamicQuantizeLinear(A)               uint8 activations, a scale per run
//   Y_int = MatMulInteger(A_q, W_q, A_zp, W_zp)                  W_q int8 [K, N], W_zp int8 zeros [N]
//   Y = Mul(Cast<float>(Y_int), Mul(A_scale, W_scale))           W_scale float [N] = max |w| / 127 per column
//
// which ONNX Runtime fuses into its DynamicQuantizeMatMul (u8s8 products on its int8 kernels). The fp32
// initializer goes where nothing else reads it.
#pragma once

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gaf/onnx_io.h"
#include "gaf/tensor.h"

namespace gaf::testing {

inline onnx::ModelProto ort_dynamic_int8(const onnx::ModelProto& in, int64_t min_elements = int64_t(1) << 16) {
  onnx::ModelProto m = in;
  onnx::GraphProto* g = m.mutable_graph();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : in.graph().initializer()) inits[t.name()] = &t;
  auto qualifies = [&](const onnx::NodeProto& n) {
    if (n.op_type() != "MatMul" || !n.domain().empty() || n.input_size() != 2) return false;
    auto it = inits.find(n.input(1));
    if (it == inits.end()) return false;
    const onnx::TensorProto& w = *it->second;
    return w.data_type() == onnx::TensorProto::FLOAT && w.dims_size() == 2 && w.dims(0) * w.dims(1) >= min_elements;
  };
  std::set<std::string> quantized, still_read;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  auto add = [&](const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    onnx::NodeProto* n = nodes.Add();
    n->set_op_type(op);
    n->set_name(outs[0] + "_" + op);
    for (auto& s : ins) n->add_input(s);
    for (auto& s : outs) n->add_output(s);
    return n;
  };
  for (const auto& n : in.graph().node()) {
    if (!qualifies(n)) {
      *nodes.Add() = n;
      for (const auto& s : n.input()) still_read.insert(s);
      continue;
    }
    const std::string& a = n.input(0);
    const std::string& w = n.input(1);
    const std::string y = n.output(0);
    if (quantized.insert(w).second) {
      const Tensor t = onnx_io::tensor_from_proto(*inits.at(w));
      const int64_t k = t.dim(0), cols = t.dim(1);
      const float* src = t.data<float>();
      std::vector<float> scale(size_t(cols), 0.f);
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < cols; ++j) scale[size_t(j)] = std::max(scale[size_t(j)], std::abs(src[i * cols + j]));
      for (float& s : scale) s = s > 0 ? s / 127.f : 1.f;
      Tensor q(DType::Int8, {k, cols});
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < cols; ++j)
          q.data<int8_t>()[i * cols + j] =
              int8_t(std::clamp(std::nearbyint(src[i * cols + j] / scale[size_t(j)]), -127.f, 127.f));
      auto put = [&](const Tensor& v, const std::string& name) {
        onnx::TensorProto* p = g->add_initializer();
        onnx_io::tensor_to_proto(v, *p);
        p->set_name(name);
      };
      put(q, w + "_quantized");
      put(Tensor(DType::Int8, {cols}, Allocator::heap(), true), w + "_zero_point");
      put(Tensor::from<float>({cols}, std::span<const float>(scale)), w + "_scale");
    }
    add("DynamicQuantizeLinear", {a}, {y + "_a_q", y + "_a_scale", y + "_a_zp"});
    add("MatMulInteger", {y + "_a_q", w + "_quantized", y + "_a_zp", w + "_zero_point"}, {y + "_int32"});
    add("Cast", {y + "_int32"}, {y + "_float"})->add_attribute()->CopyFrom([] {
      onnx::AttributeProto to;
      to.set_name("to");
      to.set_type(onnx::AttributeProto::INT);
      to.set_i(onnx::TensorProto::FLOAT);
      return to;
    }());
    add("Mul", {y + "_a_scale", w + "_scale"}, {y + "_scale"});
    add("Mul", {y + "_float", y + "_scale"}, {y});
  }
  *g->mutable_node() = std::move(nodes);
  if (quantized.empty()) throw std::runtime_error("ort_dynamic_int8: no MatMul on a large constant fp32 weight");
  auto* all = g->mutable_initializer();
  all->erase(std::remove_if(all->begin(), all->end(),
                            [&](const onnx::TensorProto& t) {
                              return quantized.count(t.name()) && !still_read.count(t.name());
                            }),
             all->end());
  return m;
}

}  // namespace gaf::testing
