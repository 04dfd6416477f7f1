#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "gaf/codegen.h"
#include "gaf/tools.h"

namespace gaf::tools {

namespace {
bool g_quiet = false;
std::ostream* g_stream = nullptr;  // tests: plain lines here instead of stderr
}  // namespace

void set_progress_quiet(bool quiet) { g_quiet = quiet; }
void set_progress_stream(std::ostream* os) { g_stream = os; }

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(total), tty_(!g_stream && isatty(STDERR_FILENO)) {}

void Progress::step(int64_t done) {
  if (g_quiet || total_ <= 0) return;
  if (tty_) {
    std::fprintf(stderr, "\r%s: %lld/%lld", label_.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_));
    std::fflush(stderr);
    shown_ = true;
    return;
  }
  // Not a terminal: a plain line at each tenth (and at the end), so logs stay short.
  const int64_t tenth = done * 10 / total_;
  if (tenth <= last_tenth_ && done != total_) return;
  last_tenth_ = tenth;
  std::ostream& os = g_stream ? *g_stream : std::cerr;
  os << label_ << ": " << done << "/" << total_ << "\n";
}

Progress::~Progress() {
  if (shown_) std::fprintf(stderr, "\n");
}

void show_compile_progress() {
  codegen::set_compile_observer([](bool done, size_t kernels, size_t units, double seconds) {
    if (g_quiet || kernels == 0) return;
    const bool tty = !g_stream && isatty(STDERR_FILENO);
    const std::string in_units = units > 1 ? fmt::format(" ({} translation units in parallel)", units) : "";
    const std::string line =
        done ? fmt::format("compiled {} generated kernel(s){} in {:.1f} s", kernels, in_units, seconds)
             : fmt::format("compiling {} generated kernel(s){} (not in the kernel cache)...", kernels,
                           in_units);
    if (tty) {
      std::fprintf(stderr, "\r%-72s%s", line.c_str(), done ? "\n" : "");
      std::fflush(stderr);
      return;
    }
    std::ostream& os = g_stream ? *g_stream : std::cerr;
    os << line << "\n";
  });
}

}  // namespace gaf::tools
