#include "runtime/thread_chooser.h"

#include <algorithm>

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
    // At the full count a probe only looks for load the change test missed: rarely. Below it, a
    // probe looks for a core that was freed: often, as far as its cost allows.
    const double slowdown = std::min(std::max(1.0, seconds / base), 64.0);
    const bool full = current_ == max_;
    const int cap = int((full ? kMaxIntervalFull : kMaxIntervalReduced) * slowdown);
    interval_ = std::min(cap, std::max((full ? 4 : 2) * interval_, int((full ? 64 : 32) * slowdown)));
    until_probe_ = interval_;
    return;
  }
  if (recent_.size() >= size_t(kFirstProbe) && (seconds > kShift * median() || seconds * kShift < median())) {
    // Load came (slower: fewer threads may pay) or went (faster: more may); where that way is open, look
    // soon.
    const int way = seconds > median() ? -1 : 1;
    recent_.assign(1, seconds);
    if (current_ + way >= 1 && current_ + way <= max_) {
      direction_ = way;
      restart(seconds);
    }
    return;
  }
  recent_.push_back(seconds);
  if (recent_.size() > kRecent) recent_.erase(recent_.begin());
  if (until_probe_ > 0) --until_probe_;
}

}  // namespace gaf::runtime
