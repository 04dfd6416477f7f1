#include "runtime/thread_chooser.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

namespace gaf::runtime {

namespace {
constexpr size_t kRecent = 8;
}

ThreadChooser::ThreadChooser(int max_threads)
    : max_(std::max(1, max_threads)), current_(max_), step_(std::max(1, max_ / 4)) {}

double ThreadChooser::median() const {
  std::vector<double> v = recent_;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

void ThreadChooser::restart(double seconds) {
  recent_.assign(1, seconds);
  step_ = std::max(1, current_ / 4);
  interval_ = kMinInterval;
  until_probe_ = kFirstProbe - 1;
}

void ThreadChooser::seed(int threads) {
  if (recent_.empty() && !probe_runs_left_) current_ = std::clamp(threads, 1, max_);
}

void ThreadChooser::continue_from(const ThreadChooser& other) {
  if (!recent_.empty() || probe_runs_left_) return;
  current_ = std::clamp(other.current_, 1, max_);
  step_ = other.step_;
  direction_ = other.direction_;
  interval_ = other.interval_;
  until_probe_ = std::max(other.until_probe_, kFirstProbe);  // its own first runs set its median first
}

namespace {

// Runnable threads: all of the machine's (/proc/loadavg), and this process's own (/proc/self/task/*/stat
// state R, the caller among them); -1 when unreadable.
int runnable_threads() {
  std::ifstream f("/proc/loadavg");
  double one, five, fifteen;
  int running = 0, total = 0;
  char slash = 0;
  if (!(f >> one >> five >> fifteen >> running >> slash >> total) || slash != '/') return -1;
  return running;
}

int own_runnable_threads() {
  int n = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(task.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t close = line.rfind(')');  // "tid (name) S ...": the name may hold spaces and parentheses
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'R') ++n;
  }
  return n;
}

}  // namespace

int ThreadChooser::idle_cores(int cores) {
  // Sessions start by the hundred while constants are folded: the answer is kept for 100 ms.
  static std::mutex mutex;
  static std::chrono::steady_clock::time_point when;
  static int cached = -1;
  std::lock_guard<std::mutex> lock(mutex);
  const auto now = std::chrono::steady_clock::now();
  if (cached < 0 || now - when > std::chrono::milliseconds(100)) {
    const int all = runnable_threads();
    cached = all < 0 ? 0 : std::max(0, all - std::max(1, own_runnable_threads()));
    when = now;
  }
  return std::max(1, cores - cached);
}

int ThreadChooser::next() {
  if (probe_runs_left_ > 0) return probe_;
  probe_ = 0;
  if (max_ == 1 || recent_.size() < size_t(kFirstProbe) || until_probe_ > 0) return current_;
  probe_runs_left_ = kProbeRuns;
  if (current_ + direction_ * step_ < 1 || current_ + direction_ * step_ > max_) direction_ = -direction_;
  probe_ = std::clamp(current_ + direction_ * step_, 1, max_);
  return probe_;
}

void ThreadChooser::record(double seconds) {
  if (!warm_) {  // the first run pays for its first touches (memory, caches, threads): not a time to judge by
    warm_ = true;
    return;
  }
  if (probe_) {
    if (--probe_runs_left_ > 0) return;  // the count's first run warms it up: not judged
    const int probed = probe_;
    probe_ = 0;
    const double base = median();
    if (seconds < kWin * base) {  // the neighbour is faster: move there, and look further the same way soon
      current_ = probed;
      restart(seconds);
      return;
    }
    direction_ = -direction_;
    step_ = std::max(1, step_ / 2);
    // At the full count a probe only looks for load the seed and the change test missed: rarely. Below it, a
    // probe looks for a core that was freed: often, as far as its cost allows.
    const double slowdown = std::min(std::max(1.0, seconds / base), 64.0);
    const bool full = current_ == max_;
    const int cap = int((full ? kMaxIntervalFull : kMaxIntervalReduced) * slowdown);
    interval_ = std::min(cap, std::max((full ? 4 : 2) * interval_, int((full ? 64 : 32) * slowdown)));
    until_probe_ = interval_;
    return;
  }
  const bool known = recent_.size() >= size_t(kFirstProbe);
  const double typical = known ? median() : 0;
  if (known && (seconds > kShift * typical || seconds * kShift < typical)) {
    // Load came (slower: fewer threads may pay) or went (faster: more may); where that way is open, look
    // soon.
    const int way = seconds > typical ? -1 : 1;
    if (current_ + way >= 1 && current_ + way <= max_) {
      direction_ = way;
      restart(seconds);
    } else {
      recent_.assign(1, seconds);
    }
    return;
  }
  recent_.push_back(seconds);
  if (recent_.size() > kRecent) recent_.erase(recent_.begin());
  if (until_probe_ > 0) --until_probe_;
}

}  // namespace gaf::runtime
