// Allocator::weights and weight_pages: a large buffer is a mapping of its own with its pages in place before
// anything writes them; a small one comes from the heap. Both aligned to 64.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gaf/tensor.h"

namespace gaf {
namespace {

// Pages of [p, p + bytes) the kernel reports resident (mincore), without touching them.
size_t resident_pages(void* p, size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t pages = (bytes + page - 1) / page;
  std::vector<unsigned char> in(pages);
  if (mincore(p, bytes, in.data()) != 0) return size_t(-1);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(WeightPages, LargeBuffersArePopulatedMappings) {
  const size_t bytes = (size_t(8) << 20) + 100;  // 8 MiB and a bit: not a whole number of pages
  void* p = Allocator::weight_pages(bytes);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);  // a mapping starts on a page
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  // Every page there before the first write: faulting them in one by one is what this saves.
  EXPECT_EQ(resident_pages(p, bytes), (bytes + page - 1) / page);
  std::memset(p, 0x5a, bytes);  // all of it writable, the last partial page too
  EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
  Allocator::free_weight_pages(p, bytes);
}

TEST(WeightPages, SmallBuffersComeFromTheHeapAligned) {
  for (size_t bytes : {size_t(0), size_t(1), size_t(100), (size_t(1) << 20) - 1}) {
    void* p = Allocator::weight_pages(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 1, bytes);
    Allocator::free_weight_pages(p, bytes);
  }
  Allocator::free_weight_pages(nullptr, 0);  // like free(nullptr)
  Allocator::free_weight_pages(nullptr, size_t(8) << 20);
}

TEST(WeightPages, WeightTensorsUseThem) {
  Tensor big(DType::Float, {1024, 1024}, Allocator::weights());  // 4 MiB
  EXPECT_EQ(resident_pages(big.raw(), big.nbytes()), big.nbytes() / size_t(sysconf(_SC_PAGESIZE)));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.raw()) % 64, 0u);
  Tensor small(DType::Float, {16}, Allocator::weights());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.raw()) % 64, 0u);
}

}  // namespace
}  // namespace gaf
