// dlopen of the CUDA vendor libraries (see vendor.h).
#include "backends/cuda/vendor.h"

#include <cuda.h>
#include <cudnn_version.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "gaf/status.h"

namespace gaf::cuda {

namespace {

// The library's handle, opened once under a lock (RTLD_LOCAL: its symbols stay out of the global scope).
void* open_library(const std::string& versioned, const std::string& plain) {
  std::string errors;
  for (const std::string& name : {versioned, plain}) {
    if (void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = ::dlerror();
    errors += fmt::format("\n  {}: {}", name, e ? e : "not found");
  }
  fail("the CUDA backend needs {}, which could not be loaded (install the CUDA toolkit's libraries, or put their "
       "folder on LD_LIBRARY_PATH):{}",
       versioned, errors);
}

template <class Fn>
void bind(void* handle, const char* library, const char* name, Fn& fn) {
  ::dlerror();
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  GAF_CHECK(fn, "{} has no function {}: it is older than the CUDA {} headers this was built with", library, name,
            CUDA_VERSION / 1000);
}

// Loads T's table from the library on first success; a failure leaves it to be tried again.
template <class T, class Load>
const T& table(std::mutex& mu, bool& ready, T& t, Load load) {
  std::lock_guard<std::mutex> lock(mu);
  if (!ready) {
    T fresh;
    load(fresh);
    t = fresh;
    ready = true;
  }
  return t;
}

}  // namespace

#define GAF_VENDOR_BIND(f) bind(h, library.c_str(), #f, t.f);

const Nvrtc& nvrtc_api() {
  static std::mutex mu;
  static bool ready = false;
  static Nvrtc tab;
  return table(mu, ready, tab, [](Nvrtc& t) {
    const std::string library = fmt::format("libnvrtc.so.{}", CUDA_VERSION / 1000);
    void* h = open_library(library, "libnvrtc.so");
    GAF_NVRTC_FUNCTIONS(GAF_VENDOR_BIND)
  });
}

const CublasLt& cublaslt_api() {
  static std::mutex mu;
  static bool ready = false;
  static CublasLt tab;
  return table(mu, ready, tab, [](CublasLt& t) {
    const std::string library = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
    void* h = open_library(library, "libcublasLt.so");
    GAF_CUBLASLT_FUNCTIONS(GAF_VENDOR_BIND)
  });
}

const Cudnn& cudnn_api() {
  static std::mutex mu;
  static bool ready = false;
  static Cudnn tab;
  return table(mu, ready, tab, [](Cudnn& t) {
    const std::string library = fmt::format("libcudnn.so.{}", CUDNN_MAJOR);
    void* h = open_library(library, "libcudnn.so");
    GAF_CUDNN_FUNCTIONS(GAF_VENDOR_BIND)
  });
}

#undef GAF_VENDOR_BIND

}  // namespace gaf::cuda
