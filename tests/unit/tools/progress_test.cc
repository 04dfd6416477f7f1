// Progress lines: off a terminal one plain line per tenth of the work (and the end), none when quiet.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "gaf/codegen.h"
#include "gaf/session.h"
#include "gaf/tools.h"
#include "test_util.h"

namespace gaf {
namespace {

TEST(Progress, PlainLinesPerTenthAndNoneWhenQuiet) {
  std::ostringstream os;
  tools::set_progress_stream(&os);
  {
    tools::Progress p("work", 100);
    for (int i = 0; i <= 100; ++i) p.step(i);
  }
  const std::string text = os.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 11) << text;  // 0, 10, ..., 100
  EXPECT_NE(text.find("work: 50/100\n"), std::string::npos) << text;
  EXPECT_NE(text.find("work: 100/100\n"), std::string::npos) << text;

  std::ostringstream quiet;
  tools::set_progress_stream(&quiet);
  tools::set_progress_quiet(true);
  {
    tools::Progress p("work", 10);
    for (int i = 0; i <= 10; ++i) p.step(i);
  }
  EXPECT_TRUE(quiet.str().empty()) << quiet.str();
  tools::set_progress_quiet(false);
  tools::set_progress_stream(nullptr);
}

// The kernel compiler on a cold cache (a fresh cache folder): a line when it starts and one when it is done;
// a warm cache compiles nothing and says nothing.
TEST(Progress, KernelCompilesOnAColdCache) {
  const char* old_cache = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old_cache ? old_cache : "";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("gaf_progress_" + std::to_string(::getpid()));
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  std::ostringstream os;
  tools::set_progress_stream(&os);
  tools::show_compile_progress();
  Model m = testing::parse(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 8] x) => (float[4, 8] y) { a = Relu(x)  b = Sigmoid(a)  y = Mul(a, b) })");
  tools::FuseOptions opts;
  opts.fusion.opt_level = 2;
  tools::fuse_model(m, opts);
  { runtime::Session cold(*m.graph); }
  const std::string first = os.str();
  os.str("");
  { runtime::Session warm(*m.graph); }
  codegen::set_compile_observer({});
  tools::set_progress_stream(nullptr);
  if (saved.empty()) ::unsetenv("XDG_CACHE_HOME");
  else ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  std::filesystem::remove_all(dir);
  EXPECT_NE(first.find("compiling 1 generated kernel(s) (not in the kernel cache)...\n"), std::string::npos) << first;
  EXPECT_NE(first.find("compiled 1 generated kernel(s) in "), std::string::npos) << first;
  EXPECT_TRUE(os.str().empty()) << os.str();
}

}  // namespace
}  // namespace gaf
