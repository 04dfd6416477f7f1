// Compiler driver and kernel cache.
//
// A translation unit is compiled once per (source, flags, compiler) and kept under the cache folder:
//
//     <cache>/<kk>/<key>.entry           "gaf-kernel-cache 1\n<sha256 of the library>\n<size in bytes>\n"
//     <cache>/<kk>/<key>.<sha:16>.so     the library, named by its own content
//     <cache>/<kk>/<key>.cpp             the source it was built from (for reading, never loaded)
//
// Invariants:
// - Nothing is loaded that was not verified: the entry must parse, the library must be a regular file owned
// by
//   us and writable by nobody else, of the recorded size, a sane ELF shared object for this machine, and hash
//   to the recorded SHA-256, read through one open descriptor whose inode the loaded path must still name. A
//   bad entry is deleted and rebuilt with a one-line warning.
// - Writers never expose half a file: each process compiles under private temporary names, fsyncs, renames
// the
//   library into place and then writes the entry (onnx_io::write_file_atomic: fsynced temporary and rename).
//   The entry names the library by content, so two processes racing on one key leave an entry that matches
//   the library it names, whichever write lands last.
// - The compiler runs from an argument vector (posix_spawnp), never through a shell: any path works, none
// runs
//   commands. Temporary files of processes that were killed are removed the next time a process opens the
//   cache.
//
// A graph's kernels (compile_kernels) are split into translation units, one per core, of balanced source
// size:
//
//     kernels k0 k1 k2 k3 k4 (largest first into the lightest unit)  ->  unit 0: prelude k0 k3   unit 1:
//     prelude k1 k2 k4
//
// Each unit is an entry of its own under the invariants above (its key the hash of its source, flags and
// compiler), the units the cache lacks are compiled by parallel compiler processes, and each is loaded as a
// library of its own (no link step: a unit's library is what the cache verifies, and a damaged one is rebuilt
// alone).
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/cpu/cache_util.h"
#include "gaf/codegen.h"
#include "gaf/onnx_io.h"

extern char** environ;

namespace gaf::codegen {

namespace fs = std::filesystem;

namespace {

constexpr const char* kEntryMagic = "gaf-kernel-cache 1";

std::string compiler() {
  const char* env = std::getenv("GAF_CXX");
  return env && *env ? env : "c++";
}

std::string join(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// First line of `<compiler> --version`, or "" when the compiler cannot be run.
std::string compiler_version(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(cxx); it != cache.end()) return it->second;
  std::string line;
  if (FILE* out = std::tmpfile()) {
    if (run_process({cxx, "--version"}, fileno(out)) == 0) {
      std::rewind(out);
      std::array<char, 256> buf{};
      if (std::fgets(buf.data(), int(buf.size()), out)) line = buf.data();
    }
    std::fclose(out);
  }
  return cache[cxx] = line;
}

// -ffp-contract=off: each op rounds its result to float as the op-by-op runtime does. Contracting a*b - c
// into an FMA across ops skips that rounding, and a value computed twice (a reduction and its broadcast
// consumer) can then differ from itself: x*y - relu(x*y) came out 1e-8 instead of 0 (found by selftest, seed
// 2).
std::vector<std::string> flags(const CompileOptions& o) {
  if (o.debug)
    return {"-std=c++17", "-O0",   "-g", "-march=native", "-fopenmp", "-fno-math-errno", "-ffp-contract=off",
            "-shared",    "-fPIC", "-w"};
  return {
      "-std=c++17",        "-O3",     "-march=native", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
      "-ffp-contract=off", "-shared", "-fPIC",         "-w"};
}

bool process_alive(long pid) { return ::kill(pid_t(pid), 0) == 0 || errno == EPERM; }

// Temporary files are named <key>.tmp.<pid>.<what>. Those of a process that no longer runs (killed
// mid-compile), or older than a day (its pid may have been reused), are removed; so are libraries no entry
// names any more (left by two processes racing on one key). Once per process and cache folder.
void sweep_stale(const fs::path& root) {
  static std::mutex mu;
  static std::set<std::string> swept;
  std::lock_guard<std::mutex> lock(mu);
  if (!swept.insert(root.string()).second) return;
  std::error_code ec;
  auto day_ago = fs::file_time_type::clock::now() - std::chrono::hours(24);
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string name = it->path().filename().string();
    size_t at = name.find(".tmp.");
    if (at == std::string::npos) continue;
    long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    std::error_code tec;
    bool old = fs::last_write_time(it->path(), tec) < day_ago;
    if (pid > 0 && (!process_alive(pid) || (!tec && old))) fs::remove(it->path(), tec);
  }
}

struct Entry {
  std::string sha;
  uint64_t size = 0;
};

std::optional<Entry> read_entry(const fs::path& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::string magic;
  Entry e;
  if (!std::getline(f, magic) || magic != kEntryMagic || !(f >> e.sha >> e.size) || e.sha.size() != 64)
    return Entry{};  // present but unreadable: a damaged entry
  return e;
}

fs::path library_path(const fs::path& dir, const std::string& key, const std::string& sha) {
  return dir / fmt::format("{}.{}.so", key, sha.substr(0, 16));
}

// Checks the library open on `fd` against its entry; "" when it may be loaded, else what is wrong with it.
std::string check_library(int fd, const Entry& e) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return fmt::format("cannot stat it: {}", std::strerror(errno));
  if (std::string why = untrusted_file_reason(st); !why.empty()) return why;
  if (uint64_t(st.st_size) != e.size)
    return fmt::format("{} bytes where its entry records {} (truncated?)", st.st_size, e.size);
  std::string bytes(size_t(st.st_size), '\0');
  if (pread(fd, bytes.data(), bytes.size(), 0) != ssize_t(bytes.size())) return "cannot read it";
  if (bytes.size() < sizeof(Elf64_Ehdr)) return "too short for an ELF header";
  Elf64_Ehdr h;
  std::memcpy(&h, bytes.data(), sizeof h);
#if defined(__x86_64__)
  constexpr int kMachine = EM_X86_64;
#elif defined(__aarch64__)
  constexpr int kMachine = EM_AARCH64;
#else
  constexpr int kMachine = EM_NONE;
#endif
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 ||
      h.e_type != ET_DYN || (kMachine != EM_NONE && h.e_machine != kMachine))
    return "not an ELF shared object for this machine";
  auto fits = [&](uint64_t off, uint64_t n, uint64_t each) {
    return off <= e.size && n * each <= e.size - off;
  };
  if (!fits(h.e_phoff, h.e_phnum, h.e_phentsize) || !fits(h.e_shoff, h.e_shnum, h.e_shentsize))
    return "its ELF tables reach past the end of the file (truncated?)";
  if (sha256_hex(bytes.data(), bytes.size()) != e.sha)
    return "its content does not match the recorded SHA-256";
  return "";
}

void remove_entry(const fs::path& entry, const std::optional<Entry>& e, const fs::path& dir,
                  const std::string& key) {
  std::error_code ec;
  if (e && !e->sha.empty()) fs::remove(library_path(dir, key, e->sha), ec);
  fs::remove(entry, ec);
}

// Loads the cached library of `key`; null when there is none or it failed its checks (then it is removed and
// a warning printed, so the caller rebuilds it).
void* load_cached(const fs::path& dir, const std::string& key, std::string* path) {
  fs::path entry_path = dir / (key + ".entry");
  std::optional<Entry> e = read_entry(entry_path);
  if (!e) return nullptr;
  std::string why;
  void* handle = nullptr;
  if (e->sha.empty()) {
    why = "its entry file is damaged";
  } else {
    fs::path lib = library_path(dir, key, e->sha);
    int fd = ::open(lib.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      why = fmt::format("its library '{}' cannot be opened: {}", lib.string(), std::strerror(errno));
    } else {
      why = check_library(fd, *e);
      // dlopen takes a path; it must still name the file just checked (not one renamed over it meanwhile).
      struct stat checked {
      }, named{};
      if (why.empty() && (fstat(fd, &checked) != 0 || stat(lib.c_str(), &named) != 0 ||
                          checked.st_ino != named.st_ino || checked.st_dev != named.st_dev))
        why = "it was replaced while being checked";
      if (why.empty()) {
        handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle) why = fmt::format("it does not load: {}", dlerror());
        *path = lib.string();
      }
      ::close(fd);
    }
  }
  if (handle) return handle;
  std::fprintf(stderr, "graph-autofusion: warning: kernel cache entry '%s' is damaged (%s); rebuilding it\n",
               entry_path.c_str(), why.c_str());
  remove_entry(entry_path, e, dir, key);
  return nullptr;
}

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The line of the compiler's first error in `src` (its diagnostics in `log`), 0 when none names one.
int first_error_line(const std::string& log, const fs::path& src) {
  std::istringstream lines(log);
  const std::string prefix = src.string() + ":";
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0 && line.find("error") != std::string::npos)
      return std::atoi(line.c_str() + prefix.size());
  return 0;
}

// Compiles `source` into the cache under `key`; "" on success, else the error (and with `error_line`, the
// line of the source the compiler's first error is on, 0 when it names none).
std::string compile_into_cache(const std::string& source, const std::vector<std::string>& argv_flags,
                               const std::string& cxx, const fs::path& dir, const std::string& key,
                               int* error_line = nullptr) {
  std::string tmp_prefix = fmt::format("{}.tmp.{}", key, getpid());
  fs::path src = dir / (tmp_prefix + ".cpp"), lib = dir / (tmp_prefix + ".so"),
           log = dir / (tmp_prefix + ".log");
  auto cleanup = [&] {
    std::error_code ignored;
    for (const fs::path& p : {src, lib, log}) fs::remove(p, ignored);
  };
  try {
    onnx_io::write_file_atomic(src.string(), source);
  } catch (const Error& e) {
    cleanup();
    return e.what();
  }
  std::vector<std::string> argv{cxx};
  argv.insert(argv.end(), argv_flags.begin(), argv_flags.end());
  argv.insert(argv.end(), {"-o", lib.string(), src.string()});
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int rc = log_fd < 0 ? -1 : run_process(argv, log_fd);
  if (log_fd >= 0) ::close(log_fd);
  std::error_code ec;
  if (rc != 0) {
    const std::string diagnostics = read_file(log);
    if (error_line) *error_line = first_error_line(diagnostics, src);
    std::istringstream lines(diagnostics);
    std::string first;
    while (std::getline(lines, first) && first.empty()) {
    }
    fs::path kept = dir / (key + ".failed.cpp");
    fs::rename(src, kept, ec);
    cleanup();
    return fmt::format("compiling generated kernels failed ({}): {}; source kept at {}", join(argv),
                       first.empty() ? "the compiler could not be run" : first, kept.string());
  }
  std::string bytes = read_file(lib);
  std::string sha = sha256_hex(bytes.data(), bytes.size());
  // The library's bytes reach the disk before any name points at them: a crash leaves no entry for a torn
  // file. The library goes into place before its entry, so an entry always names a complete library.
  int fd = ::open(lib.c_str(), O_RDONLY | O_CLOEXEC);
  std::string why = fd >= 0 && ::fsync(fd) == 0 ? "" : std::strerror(errno);
  if (fd >= 0) ::close(fd);
  fs::permissions(lib, fs::perms::owner_read | fs::perms::owner_write | fs::perms::owner_exec, ec);
  if (why.empty()) {
    fs::rename(lib, library_path(dir, key, sha), ec);
    if (ec) why = ec.message();
  }
  if (why.empty()) {
    try {
      onnx_io::write_file_atomic((dir / (key + ".entry")).string(),
                                 fmt::format("{}\n{}\n{}\n", kEntryMagic, sha, bytes.size()));
    } catch (const Error& e) {
      why = e.what();
    }
  }
  if (!why.empty()) {
    cleanup();
    return fmt::format("cannot write the kernel cache entry in '{}': {}", dir.string(), why);
  }
  fs::rename(src, dir / (key + ".cpp"), ec);
  cleanup();
  return "";
}

}  // namespace

std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/graph-autofusion";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/graph-autofusion";
  return fmt::format("/tmp/graph-autofusion-cache-{}", geteuid());
}

Library::~Library() {
  if (handle_) dlclose(handle_);
}

std::shared_ptr<Library> load_library(void* handle, std::string path) {
  auto lib = std::shared_ptr<Library>(new Library());
  lib->handle_ = handle;
  lib->path_ = std::move(path);
  return lib;
}

void* Library::find(const std::string& symbol) const { return dlsym(handle_, symbol.c_str()); }

namespace {
std::mutex& observer_mutex() {
  static std::mutex mu;
  return mu;
}
CompileObserver& observer() {
  static CompileObserver o;
  return o;
}
}  // namespace

void set_compile_observer(CompileObserver o) {
  std::lock_guard<std::mutex> lock(observer_mutex());
  observer() = std::move(o);
}

namespace {

struct Toolchain {
  std::string cxx, version;
  std::vector<std::string> flags;
};

// The compiler and its flags, or nullopt with `error` set when there is no compiler.
std::optional<Toolchain> toolchain(const CompileOptions& opts, std::string* error) {
  Toolchain t{compiler(), "", flags(opts)};
  t.version = compiler_version(t.cxx);
  if (t.version.empty()) {
    *error = fmt::format("no C++ compiler found ('{}'); set GAF_CXX", t.cxx);
    return std::nullopt;
  }
  return t;
}

// A translation unit in the cache: its key and folder, and once found or built, its loaded library.
struct CachedUnit {
  std::string key;
  fs::path dir;
  void* handle = nullptr;
  std::string path;
};

// The unit's key and folder (created, owner-only) and, when the cache holds a sound library for it, the
// library;
// "" on success, else why the folder cannot be used.
std::string open_unit(const std::string& source, const Toolchain& t, CachedUnit* u) {
  std::string keyed = source + "\n" + join(t.flags) + "\n" + t.version;
  u->key = sha256_hex(keyed.data(), keyed.size()).substr(0, 32);
  fs::path root(cache_dir());
  u->dir = root / u->key.substr(0, 2);
  std::error_code ec;
  fs::create_directories(u->dir, ec);
  if (ec) return fmt::format("cannot create the kernel cache folder '{}': {}", u->dir.string(), ec.message());
  // The cache holds code this process will run: only its owner may write into it.
  for (const fs::path& p : {root, u->dir}) ::chmod(p.c_str(), 0700);
  sweep_stale(root);
  u->handle = load_cached(u->dir, u->key, &u->path);
  return "";
}

// Builds a unit the cache lacks and loads it; "" on success.
std::string build_unit(const std::string& source, const Toolchain& t, CachedUnit* u, int* error_line) {
  if (std::string why = compile_into_cache(source, t.flags, t.cxx, u->dir, u->key, error_line); !why.empty())
    return why;
  u->handle = load_cached(u->dir, u->key, &u->path);
  if (!u->handle)
    return fmt::format("the kernel library just built in '{}' does not load (see the warning above)",
                       u->dir.string());
  return "";
}

CompileObserver current_observer() {
  std::lock_guard<std::mutex> lock(observer_mutex());
  return observer();
}

size_t count_kernels(const std::string& source) {
  size_t kernels = 0;
  for (size_t p = 0; (p = source.find("extern \"C\"", p)) != std::string::npos; p += 10) ++kernels;
  return kernels;
}

// A translation unit of compile_kernels: the prelude, then its kernels, each starting on a known line.
struct UnitSource {
  std::string text;
  std::vector<int> first_line;  // per kernel of the unit
};

UnitSource unit_source(const std::string& head, const std::vector<EmittedKernel>& kernels,
                       const std::vector<size_t>& members) {
  UnitSource u;
  u.text = head;
  for (size_t k : members) {
    u.first_line.push_back(int(std::count(u.text.begin(), u.text.end(), '\n')) + 1);
    u.text += kernels[k].source + "\n";
  }
  return u;
}

// Where a unit's compile error is: the kernel holding `line`, or the prelude before the first.
std::string error_place(const UnitSource& src, const std::vector<EmittedKernel>& kernels,
                        const std::vector<size_t>& members, int line) {
  if (line <= 0) return "";
  if (src.first_line.empty() || line < src.first_line[0]) return "; the first error is in the prelude";
  size_t i =
      size_t(std::upper_bound(src.first_line.begin(), src.first_line.end(), line) - src.first_line.begin());
  return fmt::format("; the first error is in kernel {}", kernels[members[i - 1]].sig.symbol);
}

std::string kernel_list(const std::vector<EmittedKernel>& kernels, const std::vector<size_t>& members) {
  constexpr size_t kShown = 8;
  std::string s;
  for (size_t i = 0; i < members.size() && i < kShown; ++i)
    s += (i ? ", " : "") + kernels[members[i]].sig.symbol;
  if (members.size() > kShown) s += fmt::format(" and {} more", members.size() - kShown);
  return s;
}

// A unit pays for a compiler process of its own (the prelude parsed again, the process started) once it holds
// this much kernel source.
constexpr size_t kMinUnitBytes = 16 * 1024;

}  // namespace

std::shared_ptr<Library> compile_and_load(const std::string& source, const CompileOptions& opts,
                                          std::string* error) {
  std::optional<Toolchain> t = toolchain(opts, error);
  if (!t) return nullptr;
  CachedUnit u;
  if (std::string why = open_unit(source, *t, &u); !why.empty()) {
    *error = why;
    return nullptr;
  }
  if (!u.handle) {
    const size_t kernels = count_kernels(source);
    CompileObserver observe = current_observer();
    if (observe) observe(false, kernels, 1, 0.0);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string why = build_unit(source, *t, &u, nullptr);
    if (observe)
      observe(true, kernels, 1, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!why.empty()) {
      *error = why;
      return nullptr;
    }
  }
  return load_library(u.handle, u.path);
}

int compile_jobs() {
  if (const char* env = std::getenv("GAF_COMPILE_JOBS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    GAF_CHECK(
        *end == '\0' && n >= 1 && n <= 4096,
        "GAF_COMPILE_JOBS='{}': expected the number of kernel compiler processes to run at once (1 or more)",
        env);
    return int(n);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<std::vector<size_t>> partition_kernels(const std::vector<size_t>& sizes, size_t units) {
  units = std::min(std::max<size_t>(units, 1), sizes.size());
  std::vector<size_t> order(sizes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::vector<size_t>> out(units);
  std::vector<size_t> load(units, 0);
  for (size_t k : order) {
    const size_t u = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    out[u].push_back(k);
    load[u] += sizes[k];
  }
  for (auto& members : out) std::sort(members.begin(), members.end());
  return out;
}

KernelUnits compile_kernels(const std::vector<EmittedKernel>& kernels, const CompileOptions& opts) {
  KernelUnits out;
  if (kernels.empty()) return out;
  const auto t0 = std::chrono::steady_clock::now();
  const size_t jobs = size_t(compile_jobs());
  std::vector<size_t> sizes;
  size_t total = 0;
  for (const EmittedKernel& k : kernels) {
    sizes.push_back(k.source.size() + 1);
    total += sizes.back();
  }
  out.units = partition_kernels(
      sizes, opts.units ? opts.units : std::min(jobs, std::max<size_t>(1, total / kMinUnitBytes)));
  const size_t n = out.units.size();
  out.libraries.resize(n);
  out.errors.resize(n);
  out.stats.units = n;
  const std::string head = prelude() + "\n";
  std::vector<UnitSource> sources;
  for (const auto& members : out.units) sources.push_back(unit_source(head, kernels, members));
  auto name = [&](size_t u) {
    return fmt::format("translation unit {} of {} ({})", u + 1, n, kernel_list(kernels, out.units[u]));
  };

  std::string error;
  std::optional<Toolchain> t = toolchain(opts, &error);
  std::vector<CachedUnit> cached(n);
  std::vector<size_t> missing;
  for (size_t u = 0; u < n; ++u) {
    if (t) error = open_unit(sources[u].text, *t, &cached[u]);
    if (!error.empty())
      out.errors[u] = error;
    else if (!cached[u].handle)
      missing.push_back(u);
  }
  if (!missing.empty()) {
    size_t missing_kernels = 0;
    for (size_t u : missing) missing_kernels += out.units[u].size();
    CompileObserver observe = current_observer();
    if (observe) observe(false, missing_kernels, missing.size(), 0.0);
    const auto c0 = std::chrono::steady_clock::now();
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next++) < missing.size();) {
        const size_t u = missing[i];
        int line = 0;
        std::string why;
        try {
          why = build_unit(sources[u].text, *t, &cached[u], &line);
        } catch (const std::exception& e) {
          why = e.what();
        }
        if (!why.empty())
          out.errors[u] =
              fmt::format("{}: {}{}", name(u), why, error_place(sources[u], kernels, out.units[u], line));
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < std::min(jobs, missing.size()); ++i) threads.emplace_back(worker);
    worker();
    for (std::thread& th : threads) th.join();
    out.stats.compiled = missing.size();
    if (observe)
      observe(true, missing_kernels, missing.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count());
  }
  for (size_t u = 0; u < n; ++u)
    if (cached[u].handle) out.libraries[u] = load_library(cached[u].handle, cached[u].path);
  out.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace gaf::codegen
