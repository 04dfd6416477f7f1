// NVRTC and the CUBIN cache. Under <cache>/cuda/:
//
//     <key>.entry   "gaf-cubin-cache 1\n<sha256 of the CUBIN>\n<size in bytes>\n"
//     <key>.cubin   the machine code
//     <key>.cu      the source it was compiled from (for reading and disassembling; never loaded)
//
// with <key> the SHA-256 of the source, the options and NVRTC's version. A CUBIN is used only when its entry
// parses and the file, read through one descriptor opened without following links, is a regular file owned by
// us and writable by nobody else, of the recorded size, an ELF image, and hashes to the recorded SHA-256; the
// bytes checked are the bytes loaded. Anything else is reported in one warning, deleted and compiled again.
// Both files are written through fsynced temporaries and renames, the CUBIN first, so a reader never sees
// half of one.
#include "backends/cuda/nvrtc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "backends/cuda/vendor.h"
#include "codegen/cpu/cache_util.h"
#include "gaf/codegen.h"
#include "gaf/onnx_io.h"
#include "gaf/status.h"

namespace gaf::cuda {

namespace {

namespace fs = std::filesystem;
constexpr const char* kEntryMagic = "gaf-cubin-cache 1";

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) fail("NVRTC: {} failed: {}", what, nvrtc_api().nvrtcGetErrorString(r));
}

// The verified CUBIN of `key`; nullopt when there is none, or (after a warning, the entry removed) when the
// one there fails a check.
std::optional<std::string> load_cached(const fs::path& dir, const std::string& key) {
  const fs::path entry = dir / (key + ".entry"), file = dir / (key + ".cubin");
  std::ifstream in(entry);
  if (!in) return std::nullopt;
  std::string magic, sha;
  uint64_t size = 0;
  std::string why;
  if (!std::getline(in, magic) || magic != kEntryMagic || !std::getline(in, sha) || sha.size() != 64 ||
      !(in >> size)) {
    why = "its entry file is damaged";
  } else {
    int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st {};
    std::string bytes;
    if (fd < 0) {
      why = fmt::format("its CUBIN cannot be opened: {}", std::strerror(errno));
    } else if (fstat(fd, &st) != 0) {
      why = fmt::format("its CUBIN cannot be examined: {}", std::strerror(errno));
    } else if (why = codegen::untrusted_file_reason(st); why.empty()) {
      if (uint64_t(st.st_size) != size) {
        why = fmt::format("its CUBIN has {} bytes where the entry records {} (truncated?)", st.st_size, size);
      } else {
        bytes.resize(size_t(size));
        if (pread(fd, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size()))
          why = "its CUBIN cannot be read";
        else if (bytes.size() < 4 || bytes.compare(0, 4,
                                                   "\x7f"
                                                   "ELF") != 0)
          why = "its CUBIN is not an ELF image";
        else if (codegen::sha256_hex(bytes.data(), bytes.size()) != sha)
          why = "its CUBIN does not match the recorded SHA-256";
      }
    }
    if (fd >= 0) ::close(fd);
    if (why.empty()) return bytes;
  }
  std::fprintf(stderr,
               "graph-autofusion: warning: CUDA kernel cache entry '%s' is damaged (%s); rebuilding it\n",
               entry.c_str(), why.c_str());
  std::error_code ec;
  fs::remove(entry, ec);
  fs::remove(file, ec);
  return std::nullopt;
}

}  // namespace

std::string compile_cubin(const std::string& source, int major, int minor) {
  const std::string arch = fmt::format("--gpu-architecture=sm_{}{}", major, minor);
  const std::vector<const char*> opts = {arch.c_str(), "-default-device", "--std=c++17"};
  int nv_major = 0, nv_minor = 0;
  nvrtc_api().nvrtcVersion(&nv_major, &nv_minor);
  std::string key_text = fmt::format("{}\nnvrtc {}.{}", source, nv_major, nv_minor);
  for (const char* o : opts) key_text += fmt::format(" {}", o);
  const std::string key = codegen::sha256_hex(key_text.data(), key_text.size());
  const fs::path dir = fs::path(codegen::cache_dir()) / "cuda";
  if (std::optional<std::string> cached = load_cached(dir, key)) return *cached;

  nvrtcProgram prog;
  check(nvrtc_api().nvrtcCreateProgram(&prog, source.c_str(), "gaf_kernels.cu", 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  const nvrtcResult r = nvrtc_api().nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t log_size = 0;
  nvrtc_api().nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtc_api().nvrtcGetProgramLog(prog, log.data());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (r != NVRTC_SUCCESS) {
    nvrtc_api().nvrtcDestroyProgram(&prog);
    const fs::path kept = dir / (key + ".failed.cu");
    std::ofstream(kept) << source;
    fail("NVRTC could not compile the CUDA kernels for sm_{}{} ({}); source kept at {}:\n{}", major, minor,
         nvrtc_api().nvrtcGetErrorString(r), kept.string(), log.substr(0, 4000));
  }
  size_t n = 0;
  check(nvrtc_api().nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
  std::string cubin(n, '\0');
  check(nvrtc_api().nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  nvrtc_api().nvrtcDestroyProgram(&prog);
  if (!ec) {  // a cache that cannot be written costs a compile next time, nothing else
    try {
      onnx_io::write_file_atomic((dir / (key + ".cu")).string(), source);
      onnx_io::write_file_atomic((dir / (key + ".cubin")).string(), cubin);
      onnx_io::write_file_atomic((dir / (key + ".entry")).string(),
                                 fmt::format("{}\n{}\n{}\n", kEntryMagic,
                                             codegen::sha256_hex(cubin.data(), cubin.size()), cubin.size()));
    } catch (const Error& e) {
      std::fprintf(stderr, "graph-autofusion: warning: the CUDA kernel cache in '%s' cannot be written: %s\n",
                   dir.c_str(), e.what());
    }
  }
  return cubin;
}

}  // namespace gaf::cuda
