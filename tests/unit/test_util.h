// Shared helpers for unit tests: parse ONNX text, fuse, and compare fused against unfused numerically.
#pragma once

#include <omp.h>

#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <string>

#include "gaf/onnx_io.h"
#include "gaf/session.h"
#include "gaf/tools.h"

namespace gaf::testing {

inline Model parse(const std::string& text) { return onnx_io::parse_model_text(text); }

// Runs the scope on one OpenMP thread, restoring the count after: kernels' per-thread scratch comes from the
// session's pool in an order threads race for, which moves what the pool holds by a block or two from run to run;
// tests that watch the pool's size take that race out.
struct OneThread {
  int saved = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;
};

// Runs both models on the same seeded random inputs and expects every output equal within tolerance.
inline void expect_same_outputs(const Model& a, const Model& b, double rtol = 1e-5, double atol = 1e-6,
                                uint64_t seed = 7) {
  runtime::Session sa(*a.graph), sb(*b.graph);
  auto inputs = tools::random_inputs(*a.graph, seed, 3);
  auto oa = sa.run(inputs);
  auto ob = sb.run(inputs);
  ASSERT_EQ(oa.size(), ob.size());
  for (size_t i = 0; i < oa.size(); ++i) {
    auto c = tools::compare(ob[i], oa[i], rtol, atol);
    EXPECT_TRUE(c.ok) << "output " << i << ": " << c.message << "\nfused graph:\n" << b.graph->to_string();
  }
}

// Fused copy of a model (the original stays unfused) through export -> import, so the fused model is also
// checked to survive the ONNX round trip.
inline Model fused_copy(const Model& m, tools::FuseOptions opts, tools::FuseResult* result = nullptr) {
  Model copy = onnx_io::import_model(onnx_io::export_model(m));
  tools::FuseResult r = tools::fuse_model(copy, opts);
  onnx_io::check_model(PortableModel(copy));
  if (result) *result = r;
  Model back = onnx_io::import_model(onnx_io::export_model(copy));
  infer_fused_body_shapes(*back.graph);
  return back;
}

inline int count_fused(const Graph& g) {
  int n = 0;
  for (const Node* x : g.nodes()) n += x->body ? 1 : 0;
  return n;
}

}  // namespace gaf::testing
