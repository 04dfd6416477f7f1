// The thread chooser's policy on simulated machines: a run's time as a function of its thread count.
#include "runtime/thread_chooser.h"

#include <gtest/gtest.h>

#include <functional>

namespace gaf::runtime {
namespace {

struct Tally {
  int runs = 0, at_full = 0;
  int last = 0;
};

// Runs n steps of the chooser on machine time(threads) and returns how the counts went.
Tally simulate(ThreadChooser& c, int n, const std::function<double(int)>& time, int full) {
  Tally t;
  for (int i = 0; i < n; ++i) {
    const int threads = c.next();
    EXPECT_GE(threads, 1);
    EXPECT_LE(threads, full);
    c.record(time(threads));
    ++t.runs;
    t.at_full += threads == full;
    t.last = c.current();
  }
  return t;
}

// Two cores, quiet: two threads are 1.8x faster than one.
double quiet(int threads) { return threads == 2 ? 1.0 : 1.8; }
// Two cores, another process holding one: every barrier waits out a time slice with two threads.
double loaded(int threads) { return threads == 2 ? 50.0 : 1.9; }

TEST(ThreadChooser, AQuietMachineKeepsEveryThreadAndProbesRarely) {
  ThreadChooser c(2);
  Tally t = simulate(c, 5000, quiet, 2);
  EXPECT_EQ(t.last, 2);
  // The probes at one thread (two runs each): one early, then ever further apart, to one in about 1,800 runs.
  EXPECT_GE(t.at_full, 5000 - 12) << t.at_full;
  Tally later = simulate(c, 2000, quiet, 2);
  EXPECT_GE(later.at_full, 2000 - 4) << later.at_full;
}

TEST(ThreadChooser, LoadMovesToFewerThreadsWithinAFewRunsAndBackWhenItLeaves) {
  ThreadChooser c(2);
  simulate(c, 300, quiet, 2);
  ASSERT_EQ(c.current(), 2);
  // Load arrives: the slower runs are noticed and one thread is tried at once.
  int runs_until_one = 0;
  while (c.current() != 1 && runs_until_one < 100) {
    c.record(loaded(c.next()));
    ++runs_until_one;
  }
  EXPECT_LE(runs_until_one, 5);
  // While it lasts, the probes at two threads cost a few percent of the time, not a multiple of it.
  double spent = 0;
  for (int i = 0; i < 5000; ++i) {
    const double s = loaded(c.next());
    c.record(s);
    spent += s;
  }
  EXPECT_EQ(c.current(), 1);
  EXPECT_LT(spent / (5000 * loaded(1)), 1.1) << spent;
  // The load leaves: one thread runs as before, so only a probe finds two threads faster again.
  int runs_until_two = 0;
  while (c.current() != 2 && runs_until_two < 5000) {
    c.record(quiet(c.next()));
    ++runs_until_two;
  }
  EXPECT_EQ(c.current(), 2);
  EXPECT_LE(runs_until_two, 1700) << runs_until_two;
}

// Sixteen threads with three cores taken: 14 and 15 threads wait at every barrier as 16 do, so a step of one
// finds nothing; the probes go a quarter of the count down and narrow to within 10% of the fastest count.
TEST(ThreadChooser, ManyCoresFindAFastCountPastAPlateau) {
  auto machine = [](int threads) { return threads <= 13 ? 16.0 / threads : 40.0; };
  ThreadChooser c(16);
  simulate(c, 400, machine, 16);
  EXPECT_LE(machine(c.current()), 1.1 * machine(13)) << c.current();
}

// The first run at a new count pays for waking threads and per-thread buffers: after load moved the count to
// one thread and left, the probes at two still find their way back.
TEST(ThreadChooser, AProbeIsJudgedAfterItsCountWarmedUp) {
  ThreadChooser c(2);
  int previous = 2;
  auto run = [&](const std::function<double(int)>& machine) {
    const int threads = c.next();
    c.record(machine(threads) * (threads != previous ? 1.9 : 1.0));
    previous = threads;
  };
  for (int i = 0; i < 200 && c.current() != 1; ++i) run(loaded);
  ASSERT_EQ(c.current(), 1);
  int runs = 0;
  for (; runs < 5000 && c.current() != 2; ++runs) run(quiet);
  EXPECT_EQ(c.current(), 2);
  EXPECT_LE(runs, 1800) << runs;
}

// A first run seeded at one thread by a moment's load on a quiet machine climbs back to two within a few
// runs.
TEST(ThreadChooser, ASeedTooLowIsCorrected) {
  ThreadChooser c(2);
  c.seed(1);
  int previous = 1, runs = 0;
  for (; runs < 50 && c.current() != 2; ++runs) {
    const int threads = c.next();
    c.record(quiet(threads) * (threads != previous ? 1.9 : 1.0));
    previous = threads;
  }
  EXPECT_EQ(c.current(), 2);
  EXPECT_LE(runs, 6);
}

TEST(ThreadChooser, OneThreadNeverProbes) {
  ThreadChooser c(1);
  Tally t = simulate(c, 100, quiet, 1);
  EXPECT_EQ(t.at_full, 100);
}

}  // namespace
}  // namespace gaf::runtime
