// line_vector: a std::vector of whole 64-byte cache lines, for packed operands the vector kernels load a vector
// at a time (a plain std::vector's buffer is 16-byte aligned: three times in four, every 64-byte load from it
// straddles two lines).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace gaf::runtime {

template <class T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) {}
  T* allocate(size_t n) {
    void* p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const { return true; }
};
template <class T>
using line_vector = std::vector<T, LineAllocator<T>>;

}  // namespace gaf::runtime
