#include <unistd.h>

#include <cstdio>
#include <iostream>

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

}  // namespace gaf::tools
