#include "backends/cuda/nvrtc.h"

#include <nvrtc.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "gaf/codegen.h"
#include "gaf/status.h"

namespace gaf::cuda {

namespace {

std::string sha256_hex(const std::string& s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  GAF_CHECK(EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr) == 1, "SHA-256 failed");
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) fail("NVRTC: {} failed: {}", what, nvrtcGetErrorString(r));
}

}  // namespace

std::string compile_cubin(const std::string& source, int major, int minor) {
  namespace fs = std::filesystem;
  const std::string arch = fmt::format("--gpu-architecture=sm_{}{}", major, minor);
  const std::vector<const char*> opts = {arch.c_str(), "-default-device", "--std=c++17"};
  int nv_major = 0, nv_minor = 0;
  nvrtcVersion(&nv_major, &nv_minor);
  std::string key_text = fmt::format("{}\nnvrtc {}.{}", source, nv_major, nv_minor);
  for (const char* o : opts) key_text += fmt::format(" {}", o);
  const std::string key = sha256_hex(key_text);
  const fs::path dir = fs::path(codegen::cache_dir()) / "cuda";
  const fs::path file = dir / (key + ".cubin");
  {
    std::ifstream f(file, std::ios::binary);
    std::string cached{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    // A damaged entry is not a CUBIN (ELF magic): compiled again and replaced.
    if (cached.size() > 4 && cached.compare(0, 4,
                                            "\x7f"
                                            "ELF") == 0)
      return cached;
  }
  nvrtcProgram prog;
  check(nvrtcCreateProgram(&prog, source.c_str(), "gaf_kernels.cu", 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  const nvrtcResult r = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    const fs::path kept = dir / (key + ".failed.cu");
    std::ofstream(kept) << source;
    fail("NVRTC could not compile the CUDA kernels for sm_{}{} ({}); source kept at {}:\n{}", major, minor,
         nvrtcGetErrorString(r), kept.string(), log.substr(0, 4000));
  }
  size_t n = 0;
  check(nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
  std::string cubin(n, '\0');
  check(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  nvrtcDestroyProgram(&prog);
  if (!ec) {  // written whole under a temporary name, then renamed: readers never see half a file
    std::ofstream(dir / (key + ".cu")) << source;  // beside its CUBIN, for reading and disassembling
    const fs::path tmp = dir / fmt::format("{}.tmp{}", key, ::getpid());
    if (std::ofstream(tmp, std::ios::binary).write(cubin.data(), std::streamsize(cubin.size())))
      fs::rename(tmp, file, ec);
    if (ec) fs::remove(tmp, ec);
  }
  return cubin;
}

}  // namespace gaf::cuda
