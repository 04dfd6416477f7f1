// line_vector: every buffer starts a cache line, whatever its size and however it grew.
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/kernels/fast/line_vector.h"

namespace gaf::runtime {
namespace {

bool on_line(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

TEST(LineVector, BuffersStartACacheLine) {
  for (size_t n : {1, 3, 16, 17, 1000, 40000}) {
    line_vector<float> v(n, 1.f);
    EXPECT_TRUE(on_line(v.data())) << n;
    v.resize(3 * n + 5);  // reallocated
    EXPECT_TRUE(on_line(v.data())) << n;
    EXPECT_EQ(v[n - 1], 1.f);
  }
  line_vector<double> d(7);
  EXPECT_TRUE(on_line(d.data()));
}

}  // namespace
}  // namespace gaf::runtime
