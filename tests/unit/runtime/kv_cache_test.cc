// The KV cache in place (Session::enable_kv_cache) and the strided views it hands out (Tensor::view): a decode
// loop whose presents are fed back as pasts gives bit for bit what the loop with plain tensors gives, while no step
// copies the past (the presents are views of one buffer that stays where it is), the buffer grows when it must,
// a rewound or foreign past is taken, and kernels that read data as contiguous get a copy.
#include <gtest/gtest.h>

#include "gaf/session.h"
#include "models/decoder_exports.h"
#include "test_util.h"

namespace gaf {
namespace {

std::vector<float> elements(const Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = float(t.get_double(i));
  return v;
}

TEST(TensorView, StridesElementsAndCopies) {
  Tensor base(DType::Float, {2, 3, 5, 2});  // room for 5 positions along axis 2
  for (int64_t i = 0; i < base.numel(); ++i) base.data<float>()[i] = float(i);
  Tensor v = Tensor::view(base, {2, 3, 2, 2}, base.strides());  // the first 2 positions
  EXPECT_FALSE(v.is_contiguous());
  EXPECT_EQ(v.strides(), (std::vector<int64_t>{30, 10, 2, 1}));
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.get_double(0), 0);
  EXPECT_EQ(v.get_double(4), 10);   // head 1, position 0
  EXPECT_EQ(v.get_double(13), 31);  // batch 1, head 0, position 0, depth 1
  Tensor c = v.clone();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(elements(c), elements(v));
  EXPECT_EQ(c.data<float>()[13], 31);
  EXPECT_NE(v.contiguous().raw(), v.raw());
  EXPECT_EQ(c.contiguous().raw(), c.raw());
  // Writing through a view lands in the base at the strided places.
  Tensor w = Tensor::view(base, {2, 3, 1, 2}, base.strides(), 4);  // position 2
  Tensor ones(DType::Float, {2, 3, 1, 2});
  for (int64_t i = 0; i < ones.numel(); ++i) ones.data<float>()[i] = -1.0f - float(i);
  w.copy_from(ones);
  EXPECT_EQ(base.data<float>()[4], -1);
  EXPECT_EQ(base.data<float>()[5], -2);
  EXPECT_EQ(base.data<float>()[14], -3);   // head 1, position 2
  EXPECT_EQ(base.data<float>()[3], 3);     // position 1 untouched
  EXPECT_EQ(base.data<float>()[6], 6);     // position 3 untouched
  // The whole buffer's strides give a contiguous tensor.
  EXPECT_TRUE(Tensor::view(base, base.dims(), base.strides()).is_contiguous());
  // Refused: a view reaching past its base, a reshape of a strided view.
  EXPECT_THROW(Tensor::view(base, {2, 3, 6, 2}, base.strides()), Error);
  EXPECT_THROW(Tensor::view(base, {2, 3, 2, 2}, base.strides(), 30), Error);
  EXPECT_THROW((void)v.reshaped({24}), Error);
  EXPECT_NO_THROW((void)c.reshaped({24}));
}

// present = Concat(past, Relu(new) * 2), and that present also read by a Neg (a kernel reading contiguous data).
// The step's batch has a symbol of its own, so a mismatch reaches the Concat.
constexpr const char* kStep = R"(
  <ir_version: 8, opset_import: ["" : 17]>
  g (float[B, 3, T, 4] past, float[C, 3, 1, 4] step) => (float[B, 3, U, 4] present, float[B, 3, U, 4] neg) {
    two = Constant <value = float {2.0}> ()
    r = Relu(step)
    s = Mul(r, two)
    present = Concat <axis = -2> (past, s)
    neg = Neg(present)
  }
)";

Tensor step_values(int64_t batch, int t) {
  Tensor x(DType::Float, {batch, 3, 1, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float((i * 7 + t * 3) % 11) - 4;
  return x;
}

TEST(KvCache, AppendsInPlaceGrowsAndCopiesForContiguousReaders) {
  Model m = testing::parse(kStep);
  runtime::Session plain(*m.graph), cached(*m.graph);
  const auto& pairs = cached.enable_kv_cache(4);  // room for 4 positions, then the buffer moves
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].past, "past");
  EXPECT_EQ(pairs[0].present, "present");
  EXPECT_EQ(pairs[0].axis, -2);
  Tensor p_plain(DType::Float, {2, 3, 0, 4}), p_cached = p_plain;
  const void* buffer = nullptr;
  int moves = 0;
  for (int t = 1; t <= 12; ++t) {
    std::vector<Tensor> a = plain.run({{"past", p_plain}, {"step", step_values(2, t)}});
    std::vector<Tensor> b = cached.run({{"past", p_cached}, {"step", step_values(2, t)}});
    ASSERT_EQ(b[0].dims(), (std::vector<int64_t>{2, 3, t, 4}));
    EXPECT_EQ(elements(b[0]), elements(a[0])) << "step " << t;
    EXPECT_EQ(elements(b[1]), elements(a[1])) << "step " << t;
    EXPECT_TRUE(b[1].is_contiguous());
    if (b[0].raw() != buffer) ++moves, buffer = b[0].raw();
    // Room for 4, then 8, then 16 positions: the view is strided until the buffer is full.
    const int64_t room = t <= 4 ? 4 : t <= 8 ? 8 : 16;
    EXPECT_EQ(b[0].is_contiguous(), t == room) << "step " << t;
    EXPECT_EQ(cached.stats().kv_cache_bytes, size_t(2 * 3 * room * 4) * sizeof(float));
    p_plain = a[0];
    p_cached = b[0];
  }
  EXPECT_EQ(moves, 3);  // the first buffer and two moves, not one per step
}

TEST(KvCache, RewindAndForeignPastsAreTaken) {
  Model m = testing::parse(kStep);
  runtime::Session plain(*m.graph), cached(*m.graph);
  cached.enable_kv_cache(32);
  Tensor past(DType::Float, {1, 3, 0, 4});
  std::vector<Tensor> presents;
  for (int t = 1; t <= 6; ++t) {
    presents.push_back(cached.run({{"past", presents.empty() ? past : presents.back()}, {"step", step_values(1, t)}})[0]);
  }
  // Rewind to the present of step 3 and go on from there with other tokens: the result is what a plain session
  // gives from the same (copied) past, and the buffer did not move.
  const Tensor at3 = presents[2].clone();
  std::vector<Tensor> a = plain.run({{"past", at3}, {"step", step_values(1, 40)}});
  std::vector<Tensor> b = cached.run({{"past", presents[2]}, {"step", step_values(1, 40)}});
  EXPECT_EQ(b[0].raw(), presents[2].raw());
  EXPECT_EQ(elements(b[0]), elements(a[0]));
  // A past from elsewhere (contiguous, other values) is copied into the buffer.
  Tensor foreign(DType::Float, {1, 3, 5, 4});
  for (int64_t i = 0; i < foreign.numel(); ++i) foreign.data<float>()[i] = float(i) * 0.5f;
  a = plain.run({{"past", foreign}, {"step", step_values(1, 41)}});
  b = cached.run({{"past", foreign}, {"step", step_values(1, 41)}});
  EXPECT_EQ(elements(b[0]), elements(a[0]));
  EXPECT_EQ(elements(b[1]), elements(a[1]));
  // Another batch size takes a buffer of its own shape.
  a = plain.run({{"past", Tensor(DType::Float, {3, 3, 0, 4})}, {"step", step_values(3, 42)}});
  b = cached.run({{"past", Tensor(DType::Float, {3, 3, 0, 4})}, {"step", step_values(3, 42)}});
  EXPECT_EQ(elements(b[0]), elements(a[0]));
  // A step whose operands do not line up is refused with the node's name, as Concat would.
  try {
    cached.run({{"past", b[0]}, {"step", step_values(1, 1)}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Concat"), std::string::npos) << e.what();
  }
}

// A new prompt (an empty past) after a loop goes into the buffer the loop used when the caller let go of the
// loop's presents: its pages are resident, where a new buffer's would fault in as positions are written. Twin:
// a caller still holding a present keeps it intact, and the new prompt gets a buffer of its own.
TEST(KvCache, ANewPromptTakesTheBufferNobodyHolds) {
  Model m = testing::parse(kStep);
  runtime::Session plain(*m.graph), cached(*m.graph);
  cached.enable_kv_cache(32);
  auto loop = [&](int first_value) {
    Tensor p(DType::Float, {1, 3, 0, 4});
    for (int t = 0; t < 5; ++t) p = cached.run({{"past", p}, {"step", step_values(1, first_value + t)}})[0];
    return p;
  };
  const void* buffer = loop(1).raw();  // the last present let go here
  const Tensor empty(DType::Float, {1, 3, 0, 4});
  std::vector<Tensor> b = cached.run({{"past", empty}, {"step", step_values(1, 60)}});
  EXPECT_EQ(b[0].raw(), buffer);
  EXPECT_EQ(elements(b[0]), elements(plain.run({{"past", empty}, {"step", step_values(1, 60)}})[0]));
  b.clear();

  const Tensor held = loop(10);
  const std::vector<float> held_values = elements(held);
  b = cached.run({{"past", empty}, {"step", step_values(1, 70)}});
  EXPECT_NE(b[0].raw(), held.raw());
  EXPECT_EQ(elements(held), held_values);
  EXPECT_EQ(elements(b[0]), elements(plain.run({{"past", empty}, {"step", step_values(1, 70)}})[0]));
}

TEST(KvCache, DoesNotFireWithoutAPastPresentPair) {
  // The Concat's result is not a graph output (it feeds a Relu), and a Concat of two computed values.
  Model m = testing::parse(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 3, T, 4] past, float[1, 3, 1, 4] step) => (float[1, 3, U, 4] y, float[1, 3, 2, 4] z) {
      c = Concat <axis = 2> (past, step)
      y = Relu(c)
      n = Neg(step)
      z = Concat <axis = 2> (step, n)
    }
  )");
  runtime::Session s(*m.graph);
  EXPECT_TRUE(s.enable_kv_cache(16).empty());
  std::vector<Tensor> out = s.run({{"past", Tensor(DType::Float, {1, 3, 2, 4})}, {"step", step_values(1, 1)}});
  EXPECT_TRUE(out[0].is_contiguous());
  EXPECT_EQ(s.stats().kv_cache_bytes, 0u);
  EXPECT_THROW(s.enable_kv_cache(0), Error);
}

// The decoder exports, fused (attention reads the cache's views in place): the logits and presents of a prefill
// and 20 decode steps are bit for bit those of the same fused session fed plain tensors, the cache buffers never
// move, and the session's pool does not grow with the length.
TEST(KvCache, FusedDecodersMatchBitForBit) {
  const testing::OneThread one_thread;  // the pool's size, not the threads' race for its blocks
  for (auto* text : {testing::gpt2_decoder, testing::llama_decoder}) {
    Model m = testing::parse(text(2, {}));
    tools::FuseOptions opts;
    opts.fusion.opt_level = 3;
    Model fused = testing::fused_copy(m, opts);
    runtime::Session plain(*fused.graph), cached(*fused.graph);
    const auto& pairs = cached.enable_kv_cache(64);
    ASSERT_EQ(pairs.size(), 4u);  // keys and values of 2 layers
    std::vector<std::string> pasts;
    std::vector<size_t> present_at;
    for (const auto& p : pairs) {
      pasts.push_back(p.past);
      const auto& outs = fused.graph->outputs();
      present_at.push_back(size_t(std::find_if(outs.begin(), outs.end(),
                                               [&](const Value* v) { return v->name() == p.present; }) -
                                  outs.begin()));
    }
    std::vector<Tensor> past_plain(pasts.size(), Tensor(DType::Float, {1, 4, 0, 16})), past_cached = past_plain;
    std::vector<const void*> buffers(pasts.size(), nullptr);
    size_t pool_at_2 = 0;
    std::vector<int64_t> ids = {5, 17, 3, 42, 7};
    for (int t = 0; t < 21; ++t) {
      std::map<std::string, Tensor> in_plain, in_cached;
      const Tensor tokens = Tensor::from<int64_t>({1, int64_t(ids.size())}, ids);
      in_plain.emplace("input_ids", tokens);
      in_cached.emplace("input_ids", tokens);
      for (size_t k = 0; k < pasts.size(); ++k) {
        in_plain.emplace(pasts[k], past_plain[k]);
        in_cached.emplace(pasts[k], past_cached[k]);
      }
      std::vector<Tensor> a = plain.run(in_plain), b = cached.run(in_cached);
      ASSERT_EQ(elements(b[0]), elements(a[0])) << "logits, step " << t;
      for (size_t k = 0; k < pasts.size(); ++k) {
        const Tensor &pa = a[present_at[k]], &pb = b[present_at[k]];
        ASSERT_EQ(elements(pb), elements(pa)) << pairs[k].present << ", step " << t;
        EXPECT_FALSE(pb.is_contiguous());
        if (t > 0) {
          EXPECT_EQ(pb.raw(), buffers[k]) << pairs[k].present << " moved at step " << t;
        }
        buffers[k] = pb.raw();
        past_plain[k] = pa;
        past_cached[k] = pb;
      }
      if (t == 2) pool_at_2 = cached.stats().pool_bytes;
      if (t > 2) {
        EXPECT_LE(cached.stats().pool_bytes, pool_at_2) << "step " << t;
      }
      const float* row = a[0].data<float>() + a[0].numel() - a[0].dim(-1);
      ids = {int64_t(std::max_element(row, row + a[0].dim(-1)) - row)};
    }
    EXPECT_EQ(cached.stats().kv_cache_bytes, size_t(4 * 4 * 64 * 16) * sizeof(float));
    // The pairs' buffers are carved one after another from one mapping (its pages on 2 MB pages where the
    // kernel gives them, rather than each buffer's 4 KB pages faulting in one by one).
    std::vector<const char*> starts;
    for (const void* b : buffers) starts.push_back(static_cast<const char*>(b));
    std::sort(starts.begin(), starts.end());
    for (size_t k = 1; k < starts.size(); ++k)
      EXPECT_EQ(starts[k] - starts[k - 1], std::ptrdiff_t(4 * 64 * 16 * sizeof(float))) << "buffer " << k;
  }
}

}  // namespace
}  // namespace gaf
