// How many threads a session's runs use on a machine other processes share. A run is hundreds of parallel
// kernels, each ending in a barrier where the threads wait for each other; when another process holds a core,
// one of ours is descheduled and the rest wait out its time slice at every barrier (a GPT-2-style decode step
// took 3.5 ms alone, 135-180 ms with two compilers running on the 2-core VM, and 3.6 ms on one thread). Load
// average and OpenMP's dynamic mode react over minutes and count our own threads; this measures instead. A
// session keeps one chooser per kind of run (runs whose symbolic dims have the same bit lengths: a decoder's
// prompt apart from its steps, whose times differ by more than the 1.5x below that means load changed), and
// each kind's first run starts at the cores idle then (idle_cores). Now and then a probe runs with a few
// threads more or fewer than the current count (a quarter of the count away after a change, half as far after
// each losing probe, down to one), and the count moves there when the probe was clearly faster than the
// current count's recent runs. A probe is two runs and only the second is judged: the first at a new count
// pays for waking threads, per-thread buffers and the primitives it builds (kernels whose work split is fixed
// when built, oneDNN's, keep one per thread count: dnnl_util.h's ShapeCache). Probes come often after a
// change (a switch, or runs that suddenly take much longer or shorter: load came or went) and back off while
// the count keeps winning: at the full count to one in 1024 runs (load that comes later shows as slower
// runs), below it to one in 64 (a freed core is taken back within seconds of decode steps); a probe that was
// r times slower spaces the next ones r times further apart, so probing a loaded core costs a few percent.
#pragma once

#include <vector>

namespace gaf::runtime {

class ThreadChooser {
 public:
  explicit ThreadChooser(int max_threads);
  // The thread count the next run should use.
  int next();
  // That run's time in seconds (every next() is followed by one record()). The first run's is left out: it pays
  // for first touches (a decoder's prompt: 12 ms where the next ones take 6), and a median it inflated would
  // make a slower count look faster.
  void record(double seconds);
  int current() const { return current_; }
  // Before the first run: start at `threads` (clamped to [1, max]) instead of the full count.
  void seed(int threads);
  // Before the first run: go on from `other`'s count and its probing pace (a new kind of run in a session that
  // has run others: what those found about the machine holds for it too), with no run times of its own yet.
  void continue_from(const ThreadChooser& other);
  // The cores no other process's thread is running on right now, of `cores`: Linux's count of runnable
  // threads
  // (/proc/loadavg) less this process's (its threads in state R); `cores` when that cannot be read.
  static int idle_cores(int cores);

  static constexpr int kFirstProbe = 3;   // runs at a count before it is compared with a neighbour
  static constexpr int kMinInterval = 4;  // runs between probes after a change
  static constexpr int kMaxIntervalFull =
      1024;  // ... at most, at the full count (times the last probe's slowdown)
  static constexpr int kMaxIntervalReduced = 64;  // ... at most, below it (likewise)
  static constexpr int kProbeRuns = 2;            // runs a probe lasts (the last is judged)
  static constexpr double kWin = 0.9;             // a probe must take under 90% of the current count's median
  static constexpr double kShift = 1.5;           // a run 1.5x off the median: the machine changed

 private:
  double median() const;
  void restart(double seconds);

  int max_, current_;
  bool warm_ = false;   // a run was recorded (the first is not judged)
  int probe_ = 0;       // the count the pending run uses when it is a probe; 0: not a probe
  int probe_runs_left_ = 0;  // of the pending probe
  int step_ = 1;        // how far the next probe goes
  int direction_ = -1;  // the next probe's direction: fewer threads first; it turns after a losing probe
  int until_probe_ = 0;
  int interval_ = kMinInterval;
  std::vector<double> recent_;  // the current count's latest run times (at most 8)
};

}  // namespace gaf::runtime
