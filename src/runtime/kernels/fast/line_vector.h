// line_vector: a std::vector of whole 64-byte cache lines, for packed operands the vector kernels load a vector
// at a time (a plain std::vector's buffer is 16-byte aligned: three times in four, every 64-byte load from it
// straddles two lines).
#pragma once

#include <cstddef>
#include <vector>

#include "gaf/tensor.h"

namespace gaf::runtime {

template <class T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) {}
  // Packed weights, written whole as soon as they are taken: large ones in populated mappings of their own.
  T* allocate(size_t n) { return static_cast<T*>(Allocator::weight_pages(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { Allocator::free_weight_pages(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const { return true; }
};
template <class T>
using line_vector = std::vector<T, LineAllocator<T>>;

}  // namespace gaf::runtime
