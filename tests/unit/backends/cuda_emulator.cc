#include "backends/cuda_emulator.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace gaf::testing {

namespace {

namespace fs = std::filesystem;

// What CUDA source needs, for the host compiler. The CUDA text itself goes into namespace gaf_cuda (its
// typedefs of int64_t and friends then name gaf_cuda::int64_t and cannot clash with <cstdint>); the launchers
// after it.
const char* kShim = R"SHIM(// ---- graph-autofusion CUDA emulator shim ----
#include <math.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Blocks run one after another, so a function-local static is the running block's shared memory.
#define __shared__ static

struct gaf_emu_dim3 {
  unsigned x, y, z;
};
thread_local gaf_emu_dim3 threadIdx{0, 0, 0}, blockIdx{0, 0, 0};
gaf_emu_dim3 gridDim{1, 1, 1}, blockDim{1, 1, 1};

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, sizeof f); return f; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, sizeof f); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, sizeof i); return i; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, sizeof u); return u; }

namespace gaf_emu {

constexpr int kMaxThreads = 1024, kGuard = 256;
constexpr unsigned char kSmemFill = 0xff, kGuardFill = 0xa5;  // 0xffffffff is a NaN

std::mutex error_mutex;
std::string error;
void fail(const std::string& what) {
  std::lock_guard<std::mutex> lk(error_mutex);
  if (error.empty()) error = what;
}

// Barrier generations completed in this launch: the launching thread aborts when it stops moving (a deadlock
// would otherwise hang the test run).
std::atomic<unsigned long> progress{0};

// Threads that meet at a barrier (a block, or a warp): `live` of them, fewer after some returned from the kernel.
// Arrivals are counted under a mutex; waiters sleep on the generation (a futex), without the mutex.
struct Group {
  std::mutex m;
  const char* what = "";
  int size = 0, live = 0, arrived = 0, or_acc = 0, or_res = 0;
  std::atomic<unsigned> gen{0};

  void reset(int n, const char* name) {
    std::lock_guard<std::mutex> lk(m);
    what = name, size = live = n, arrived = 0, or_acc = 0;
  }
  void complete() {  // under m
    or_res = or_acc, or_acc = 0, arrived = 0;
    gen.fetch_add(1, std::memory_order_release);
    gen.notify_all();
    progress.fetch_add(1, std::memory_order_relaxed);
  }
  int sync(int v) {
    unsigned g;
    {
      std::lock_guard<std::mutex> lk(m);
      if (live != size)
        fail(std::string(what) + " reached after threads of the " + (size > 32 ? "block" : "warp") +
             " returned (block " + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + ", thread " +
             std::to_string(threadIdx.x) + ")");
      g = gen.load(std::memory_order_relaxed);
      or_acc |= v;
      if (++arrived == live) {
        complete();
        return or_res;
      }
    }
    while (gen.load(std::memory_order_acquire) == g) gen.wait(g, std::memory_order_acquire);
    // No later phase completes before this thread arrives again: or_res is still this phase's.
    return or_res;
  }
  // A thread returned from the kernel: later barriers of this block no longer wait for it.
  void drop() {
    std::lock_guard<std::mutex> lk(m);
    --live;
    if (arrived > 0) {
      fail(std::string("a thread returned while others of its ") + (size > 32 ? "block" : "warp") + " wait at " +
           what + " (block " + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + ", thread " +
           std::to_string(threadIdx.x) + ")");
      if (arrived == live) complete();
    }
  }
};

struct alignas(8) Slot {
  unsigned char b[8];
};

Group block_sync;
Group warp_sync[kMaxThreads / 32];
Slot slots[kMaxThreads / 32][2][32];  // [warp][parity][lane]
unsigned char* dyn_smem = nullptr;
size_t dyn_bytes = 0;
int block_threads = 0;
std::mutex end_mutex;
int finished = 0;
std::atomic<unsigned> end_gen{0};
std::atomic<int> threads_done{0};
thread_local unsigned shuffles = 0;

void reset_block() {
  block_sync.reset(block_threads, "__syncthreads");
  for (int w = 0; w * 32 < block_threads; ++w)
    warp_sync[w].reset(block_threads - 32 * w < 32 ? block_threads - 32 * w : 32, "a warp shuffle");
  std::memset(dyn_smem, kSmemFill, dyn_bytes);
}

// The end of a block: the thread leaves its barriers, then waits until every thread of the block is done.
void finish_block() {
  warp_sync[threadIdx.x >> 5].drop();
  block_sync.drop();
  unsigned g;
  {
    std::lock_guard<std::mutex> lk(end_mutex);
    g = end_gen.load(std::memory_order_relaxed);
    if (++finished == block_threads) {
      finished = 0;
      reset_block();
      end_gen.fetch_add(1, std::memory_order_release);
      end_gen.notify_all();
      progress.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  while (end_gen.load(std::memory_order_acquire) == g) end_gen.wait(g, std::memory_order_acquire);
}

template <class T> T exchange(unsigned mask, T v, int src, int width) {
  static_assert(sizeof(T) <= 8, "shuffles of up to 8 bytes");
  if (mask != 0xffffffffu || width != 32) fail("the emulator shuffles full warps only (mask 0xffffffff, width 32)");
  const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31u, p = shuffles++ & 1u;
  std::memcpy(slots[warp][p][lane].b, &v, sizeof(T));
  warp_sync[warp].sync(0);
  T r;
  std::memcpy(&r, slots[warp][p][unsigned(src) & 31u].b, sizeof(T));
  return r;
}

using KernelCall = void (*)(const void*);

const char* run_grid(KernelCall call, const void* args, unsigned gx, unsigned gy, unsigned block, size_t smem) {
  error.clear();
  if (block == 0 || block > unsigned(kMaxThreads) || gx == 0 || gy == 0) {
    error = "bad launch configuration";
    return error.c_str();
  }
  gridDim = {gx, gy, 1};
  blockDim = {block, 1, 1};
  block_threads = int(block);
  std::vector<unsigned char> buffer(smem + kGuard, kGuardFill);
  dyn_smem = buffer.data();
  dyn_bytes = smem;
  finished = 0;
  threads_done = 0;
  reset_block();
  // The device runs blocks in no particular order: here in a shuffled one (the same for a launch configuration),
  // so a block that writes another block's output, or relies on the order, shows.
  std::vector<gaf_emu_dim3> order;
  for (unsigned by = 0; by < gy; ++by)
    for (unsigned bx = 0; bx < gx; ++bx) order.push_back({bx, by, 0});
  unsigned long long state = 0x9e3779b97f4a7c15ull ^ (gx * 2654435761ull + gy);
  for (size_t i = order.size(); i > 1; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(order[i - 1], order[size_t(state >> 33) % i]);
  }
  std::vector<std::thread> threads;
  threads.reserve(block);
  for (unsigned t = 0; t < block; ++t)
    threads.emplace_back([=, &order] {
      threadIdx = {t, 0, 0};
      for (const gaf_emu_dim3& b : order) {
        blockIdx = b;
        shuffles = 0;
        call(args);
        finish_block();
      }
      threads_done.fetch_add(1);
    });
  // Watch for a deadlock while the threads run: no barrier completed for a minute.
  unsigned long seen = progress.load();
  auto last = std::chrono::steady_clock::now();
  while (threads_done.load() < int(block)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (const unsigned long p = progress.load(); p != seen) {
      seen = p, last = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last > std::chrono::seconds(60)) {
      std::fprintf(stderr, "gaf CUDA emulator: no barrier completed for 60 s: deadlock (threads of a block or warp "
                   "wait at different barriers)\n");
      std::fflush(stderr);
      std::abort();
    }
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = smem; i < smem + kGuard; ++i)
    if (buffer[i] != kGuardFill) {
      fail("a write past the " + std::to_string(smem) + " bytes of dynamic shared memory (byte " + std::to_string(i) +
           ")");
      break;
    }
  dyn_smem = nullptr;
  return error.c_str();
}

}  // namespace gaf_emu

inline void __syncthreads() { gaf_emu::block_sync.sync(0); }
inline int __syncthreads_or(int v) { return gaf_emu::block_sync.sync(v != 0); }
inline void __syncwarp(unsigned = 0xffffffffu) { gaf_emu::warp_sync[threadIdx.x >> 5].sync(0); }
template <class T> T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return gaf_emu::exchange(mask, v, int(threadIdx.x & 31u) ^ lane_mask, width);
}
template <class T> T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  return gaf_emu::exchange(mask, v, src_lane, width);
}
// ---- end of the shim ----
)SHIM";

struct Kernel {
  std::string name, arg_type;
  unsigned bounds = 1024;
};

// `extern __shared__ T name[];` -> a pointer to the launch's dynamic buffer; `extern "C"` dropped from the
// kernels (C++ functions in namespace gaf_cuda, called by the launchers). Line by line: the heads are one
// line.
std::string transform(const std::string& source, std::vector<Kernel>& kernels) {
  static const std::regex dyn(
      R"(^(\s*)extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_][\w ]*?)\s+(\w+)\s*\[\s*\]\s*;(.*)$)");
  static const std::regex head(
      R"(extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*)?(\w+)\s*\(\s*const\s+(\w+)\s+\w+\s*\))");
  std::istringstream in(source);
  std::ostringstream out;
  std::string line;
  int globals = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.find("__shared__") != std::string::npos && line.find("extern") != std::string::npos) {
      if (!std::regex_match(line, m, dyn))
        throw std::runtime_error("emulator: dynamic shared memory not understood: " + line);
      out << m[1] << m[2] << "* const " << m[3] << " = reinterpret_cast<" << m[2]
          << "*>(::gaf_emu::dyn_smem);" << m[4] << "\n";
      continue;
    }
    if (line.find("__global__") != std::string::npos && line.find("#define") == std::string::npos) {
      ++globals;
      if (!std::regex_search(line, m, head))
        throw std::runtime_error(
            "emulator: kernel head not understood (extern \"C\" __global__ void "
            "[__launch_bounds__(N)] NAME(const TYPE arg)): " +
            line);
      Kernel k{m[2], m[3], m[1].matched ? unsigned(std::stoul(m[1])) : 1024u};
      for (const Kernel& o : kernels)
        if (o.name == k.name) throw std::runtime_error("emulator: kernel " + k.name + " defined twice");
      kernels.push_back(k);
      const std::string h = m[0].str();
      line = m.prefix().str() + h.substr(h.find("__global__")) + m.suffix().str();
    }
    out << line << "\n";
  }
  if (globals != int(kernels.size()))
    throw std::runtime_error("emulator: a __global__ function was not understood");
  return out.str();
}

std::string launchers(const std::vector<Kernel>& kernels) {
  std::ostringstream os;
  os << "\n// ---- launchers ----\n";
  for (const Kernel& k : kernels) {
    os << "static void gaf_emu_call_" << k.name << "(const void* a) { gaf_cuda::" << k.name
       << "(*static_cast<const gaf_cuda::" << k.arg_type << "*>(a)); }\n"
       << "extern \"C\" __attribute__((visibility(\"default\"))) const char* gaf_emu_launch_" << k.name
       << "(const void* a, unsigned gx, unsigned gy, unsigned block, size_t smem) {\n"
       << "  return gaf_emu::run_grid(&gaf_emu_call_" << k.name << ", a, gx, gy, block, smem);\n}\n"
       << "extern \"C\" __attribute__((visibility(\"default\"))) size_t gaf_emu_argsize_" << k.name
       << "() { return sizeof(gaf_cuda::" << k.arg_type << "); }\n"
       << "extern \"C\" __attribute__((visibility(\"default\"))) unsigned gaf_emu_bounds_" << k.name
       << "() { return " << k.bounds << "u; }\n";
  }
  return os.str();
}

}  // namespace

std::string numbered(const std::string& source) {
  std::istringstream in(source);
  std::ostringstream out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) out << n << ": " << line << "\n";
  return out.str();
}

CudaEmulator::CudaEmulator(std::string cuda_source) : source_(std::move(cuda_source)) {
  std::vector<Kernel> kernels;
  const std::string body = transform(source_, kernels);
  emulated_ = std::string(kShim) + "namespace gaf_cuda {\n" + body + "\n}  // namespace gaf_cuda\n" +
              launchers(kernels);
  std::string tmpl = (fs::temp_directory_path() / "gaf_cuda_emu_XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("emulator: mkdtemp failed");
  dir_ = tmpl;
  const fs::path src = fs::path(dir_) / "kernels.cc", lib = fs::path(dir_) / "kernels.so",
                 log = fs::path(dir_) / "compile.log";
  std::ofstream(src) << emulated_;
  const char* env = std::getenv("GAF_CXX");
  const std::string cxx = env && *env ? env : "c++";
  const std::string cmd = cxx + " -O1 -std=c++20 -shared -fPIC -pthread -w -fvisibility=hidden -o " +
                          lib.string() + " " + src.string() + " > " + log.string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::stringstream msg;
    msg << "emulator: `" << cmd << "` failed (source kept in " << dir_ << "):\n"
        << std::ifstream(log).rdbuf() << "\n"
        << numbered(emulated_);
    throw std::runtime_error(msg.str());
  }
  handle_ = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) throw std::runtime_error(std::string("emulator: dlopen: ") + ::dlerror());
}

CudaEmulator::~CudaEmulator() {
  if (handle_) ::dlclose(handle_);
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

void CudaEmulator::launch(const std::string& kernel, const void* args, size_t args_size, EmuDim grid,
                          unsigned block, size_t dynamic_smem) {
  auto launch_fn = reinterpret_cast<const char* (*)(const void*, unsigned, unsigned, unsigned, size_t)>(
      ::dlsym(handle_, ("gaf_emu_launch_" + kernel).c_str()));
  auto size_fn = reinterpret_cast<size_t (*)()>(::dlsym(handle_, ("gaf_emu_argsize_" + kernel).c_str()));
  auto bounds_fn = reinterpret_cast<unsigned (*)()>(::dlsym(handle_, ("gaf_emu_bounds_" + kernel).c_str()));
  if (!launch_fn || !size_fn || !bounds_fn) throw std::runtime_error("emulator: no kernel " + kernel);
  if (size_fn() != args_size)
    throw std::runtime_error("emulator: " + kernel + " takes " + std::to_string(size_fn()) +
                             " bytes of arguments, the host passes " + std::to_string(args_size));
  if (block > bounds_fn())
    throw std::runtime_error("emulator: " + kernel + " launched with " + std::to_string(block) +
                             " threads, above its __launch_bounds__(" + std::to_string(bounds_fn()) + ")");
  const std::string err = launch_fn(args, grid.x, grid.y, block, dynamic_smem);
  if (!err.empty()) throw std::runtime_error("emulator: " + kernel + ": " + err);
}

}  // namespace gaf::testing
