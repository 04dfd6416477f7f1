// The kernel cache loads nothing it has not verified: a truncated, emptied or overwritten library, or a
// damaged entry, is reported in one warning and rebuilt, never dlopen'ed (which died with SIGBUS or SIGILL).
// The compiler runs without a shell, so a cache path with quotes or `$(...)` in it works and runs nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gaf/codegen.h"

namespace gaf::codegen {
namespace {

namespace fs = std::filesystem;

class KernelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("XDG_CACHE_HOME");
    had_old_ = old != nullptr;
    if (old) old_ = old;
    // A quote, a space and a command substitution: through a shell this would not compile or would run
    // `touch`.
    // A parameterised test's name has a '/' (IsReportedAndRebuilt/0): one folder, so TearDown removes it all.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    root_ = fs::temp_directory_path() / fmt::format("gaf cache's $(touch PWNED) {}_{}", getpid(), name);
    fs::remove_all(root_);
    setenv("XDG_CACHE_HOME", root_.c_str(), 1);
  }
  void TearDown() override {
    if (had_old_)
      setenv("XDG_CACHE_HOME", old_.c_str(), 1);
    else
      unsetenv("XDG_CACHE_HOME");
    fs::remove_all(root_);
  }

  static std::string source(int v) {
    return fmt::format("extern \"C\" int gaf_probe() {{ return {}; }}\n", v);
  }

  static int call(const Library& lib) {
    auto fn = reinterpret_cast<int (*)()>(lib.find("gaf_probe"));
    return fn ? fn() : -1;
  }

  std::vector<fs::path> files_named(const std::string& part) {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(root_))
      if (e.is_regular_file() && e.path().filename().string().find(part) != std::string::npos)
        out.push_back(e.path());
    return out;
  }

  // Compiles source(v), loads it and checks it returns v; returns the library's path.
  std::string load(int v, std::string* warnings = nullptr) {
    std::string error;
    ::testing::internal::CaptureStderr();
    auto lib = compile_and_load(source(v), {}, &error);
    std::string err = ::testing::internal::GetCapturedStderr();
    if (warnings) *warnings = err;
    EXPECT_TRUE(lib) << error;
    if (!lib) return "";
    EXPECT_EQ(call(*lib), v);
    return lib->path();
  }

  fs::path root_;
  std::string old_;
  bool had_old_ = false;
};

TEST_F(KernelCache, AnyPathWorksAndNoShellRuns) {
  std::string warnings;
  std::string path = load(7, &warnings);
  EXPECT_EQ(path.rfind(root_.string(), 0), 0u) << path;
  EXPECT_EQ(warnings, "");
  EXPECT_FALSE(fs::exists("PWNED"));
  EXPECT_EQ(files_named("PWNED").size(), 0u);
  EXPECT_EQ(files_named(".tmp.").size(), 0u) << "temporary files left behind";
  // Found in the cache the second time: the same library, no warning.
  EXPECT_EQ(load(7, &warnings), path);
  EXPECT_EQ(warnings, "");
}

enum class Damage { Truncate, Empty, Overwrite, GarbageEntry, MissingLibrary };

class DamagedEntry : public KernelCache, public ::testing::WithParamInterface<Damage> {};

TEST_P(DamagedEntry, IsReportedAndRebuilt) {
  fs::path lib = load(11);
  ASSERT_TRUE(
      fs::exists(lib));  // the Library above is closed again: nothing maps the file while it is damaged
  auto entries = files_named(".entry");
  ASSERT_EQ(entries.size(), 1u);
  switch (GetParam()) {
    case Damage::Truncate:
      fs::resize_file(lib, fs::file_size(lib) / 2);
      break;
    case Damage::Empty:
      fs::resize_file(lib, 0);
      break;
    case Damage::Overwrite: {
      std::fstream f(lib, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(std::streamoff(fs::file_size(lib) / 3));
      f << std::string(64, '\xcc');
      break;
    }
    case Damage::GarbageEntry:
      std::ofstream(entries[0]) << "not an entry";
      break;
    case Damage::MissingLibrary:
      fs::remove(lib);
      break;
  }
  std::string warnings;
  load(11, &warnings);
  EXPECT_NE(warnings.find("kernel cache entry"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("is damaged"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("rebuilding it"), std::string::npos) << warnings;
  EXPECT_EQ(std::count(warnings.begin(), warnings.end(), '\n'), 1) << "one line: " << warnings;
  // Rebuilt for good: the next load is silent.
  load(11, &warnings);
  EXPECT_EQ(warnings, "");
}

INSTANTIATE_TEST_SUITE_P(Kinds, DamagedEntry,
                         ::testing::Values(Damage::Truncate, Damage::Empty, Damage::Overwrite,
                                           Damage::GarbageEntry, Damage::MissingLibrary));

TEST_F(KernelCache, LibraryWritableByOthersIsNotLoaded) {
  fs::path lib = load(5);
  fs::permissions(lib, fs::perms::others_write, fs::perm_options::add);
  std::string warnings;
  load(5, &warnings);
  EXPECT_NE(warnings.find("writable by other users"), std::string::npos) << warnings;
}

TEST_F(KernelCache, FailedCompileSaysWhyAndLeavesNoTemporaries) {
  std::string error;
  auto lib = compile_and_load("this is not C++\n", {}, &error);
  EXPECT_FALSE(lib);
  EXPECT_NE(error.find("compiling generated kernels failed"), std::string::npos) << error;
  EXPECT_NE(error.find("source kept at"), std::string::npos) << error;
  EXPECT_EQ(files_named(".tmp.").size(), 0u);
  EXPECT_EQ(files_named(".entry").size(), 0u);
}

TEST_F(KernelCache, TemporariesOfDeadProcessesAreRemoved) {
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  fs::create_directories(root_ / "graph-autofusion" / "ab");
  fs::path stale = root_ / "graph-autofusion" / "ab" / fmt::format("abcd.tmp.{}.so", dead);
  fs::path live = root_ / "graph-autofusion" / "ab" / fmt::format("abcd.tmp.{}.so", getpid());
  std::ofstream(stale) << "half a library";
  std::ofstream(live) << "being written";
  load(3);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
}

}  // namespace
}  // namespace gaf::codegen
