// Compiler driver and kernel cache. A translation unit is compiled once per (source, flags, compiler) and kept
// under the cache folder as <hash>.so. Several processes may share the cache: each compiles to a private temporary
// name and renames it into place (rename is atomic), so a reader never sees a half-written library.
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "gaf/codegen.h"
#include "gaf/onnx_io.h"

namespace gaf::codegen {

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string compiler() {
  const char* env = std::getenv("GAF_CXX");
  return env && *env ? env : "c++";
}

// First line of `<compiler> --version`, or "" when the compiler cannot be run.
std::string compiler_version(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(cxx); it != cache.end()) return it->second;
  std::string cmd = "'" + cxx + "' --version 2>/dev/null";
  std::string line;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 256> buf{};
    if (fgets(buf.data(), int(buf.size()), p)) line = buf.data();
    if (pclose(p) != 0) line.clear();
  }
  return cache[cxx] = line;
}

// -ffp-contract=off: each op rounds its result to float as the op-by-op runtime does. Contracting a*b - c into
// an FMA across ops skips that rounding, and a value computed twice (a reduction and its broadcast consumer)
// can then differ from itself: x*y - relu(x*y) came out 1e-8 instead of 0 (found by selftest, seed 2).
std::string flags(const CompileOptions& o) {
  return o.debug ? "-std=c++17 -O0 -g -march=native -fopenmp -fno-math-errno -ffp-contract=off -shared -fPIC -w"
                 : "-std=c++17 -O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -ffp-contract=off "
                   "-shared -fPIC -w";
}

}  // namespace

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/graph-autofusion";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/graph-autofusion";
  return "/tmp/graph-autofusion-cache";
}

Library::~Library() {
  if (handle_) dlclose(handle_);
}

void* Library::find(const std::string& symbol) const { return dlsym(handle_, symbol.c_str()); }

std::shared_ptr<Library> compile_and_load(const std::string& source, const CompileOptions& opts, std::string* error) {
  namespace fs = std::filesystem;
  std::string cxx = compiler();
  std::string version = compiler_version(cxx);
  if (version.empty()) {
    *error = fmt::format("no C++ compiler found ('{}'); set GAF_CXX", cxx);
    return nullptr;
  }
  std::string key = fmt::format("{:016x}", fnv1a(source + "\n" + flags(opts) + "\n" + version));
  fs::path dir = fs::path(cache_dir()) / key.substr(0, 2);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    *error = fmt::format("cannot create the kernel cache folder '{}': {}", dir.string(), ec.message());
    return nullptr;
  }
  fs::path so = dir / (key + ".so");
  if (!fs::exists(so)) {
    fs::path src = dir / fmt::format("{}.{}.cpp", key, getpid());
    fs::path tmp = dir / fmt::format("{}.{}.so.tmp", key, getpid());
    fs::path log = dir / fmt::format("{}.{}.log", key, getpid());
    {
      std::ofstream f(src);
      f << source;
    }
    std::string cmd = fmt::format("'{}' {} -o '{}' '{}' >'{}' 2>&1", cxx, flags(opts), tmp.string(), src.string(),
                                  log.string());
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
      std::ifstream lf(log);
      std::string first;
      std::getline(lf, first);
      *error = fmt::format("compiling generated kernels failed ({}): {}; source kept at {}", cmd, first, src.string());
      fs::remove(tmp, ec);
      return nullptr;
    }
    fs::rename(tmp, so, ec);
    fs::rename(src, dir / (key + ".cpp"), ec);
    fs::remove(log, ec);
  }
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *error = fmt::format("cannot load '{}': {}", so.string(), dlerror());
    return nullptr;
  }
  auto lib = std::shared_ptr<Library>(new Library());
  lib->handle_ = h;
  lib->path_ = so.string();
  return lib;
}

}  // namespace gaf::codegen
