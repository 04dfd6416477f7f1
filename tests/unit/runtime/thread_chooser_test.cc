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

// A server's decoder: a prompt (3x a step's time) after every 20 steps, on a quiet machine. One chooser per kind
// of run, the second going on from the first, keeps both threads and probes as rarely as one kind alone does.
TEST(ThreadChooser, PromptsAmongStepsAreNotTakenForLoad) {
  ThreadChooser steps(2), prompts(2);
  auto run = [](ThreadChooser& c, double scale) {
    const int threads = c.next();
    c.record(scale * quiet(threads));
    return threads;
  };
  int at_full = 0, runs = 0;
  run(steps, 1.0);
  prompts.continue_from(steps);
  EXPECT_EQ(prompts.current(), 2);
  for (int i = 0; i < 4200; ++i, ++runs) at_full += run(i % 21 == 20 ? prompts : steps, i % 21 == 20 ? 3.0 : 1.0) == 2;
  EXPECT_GE(at_full, runs - 16) << at_full << " of " << runs;
}

// Its twin: the same runs through one chooser read each prompt as load that came and each step after it as
// load that left, and probe one thread after most of them.
TEST(ThreadChooser, OneChooserForPromptsAndStepsProbesAfterEachPrompt) {
  ThreadChooser c(2);
  int at_full = 0;
  for (int i = 0; i < 4200; ++i) {
    const int threads = c.next();
    c.record((i % 21 == 20 ? 3.0 : 1.0) * quiet(threads));
    at_full += threads == 2;
  }
  EXPECT_LT(at_full, 4200 - 200) << at_full;
}

// A new kind of run that goes on from a session where load put the count at one thread starts there, and does
// not probe before it has run a few times.
TEST(ThreadChooser, ANewKindGoesOnFromTheCountFound) {
  ThreadChooser first(2);
  first.seed(1);
  simulate(first, 50, loaded, 2);
  ASSERT_EQ(first.current(), 1);
  ThreadChooser next(2);
  next.continue_from(first);
  EXPECT_EQ(next.current(), 1);
  for (int i = 0; i < ThreadChooser::kFirstProbe; ++i) {
    EXPECT_EQ(next.next(), 1);
    next.record(loaded(1) * 4);
  }
}

// A session's first runs pay for first touches (a decoder's prompt: 12 ms, then 8, then 6): the first is left
// out, so the slow second does not make the median that the first probe, at one thread, is judged against.
TEST(ThreadChooser, ColdFirstRunsDoNotMoveTheCount) {
  ThreadChooser c(2);
  const double cold[] = {3.0, 2.5};
  for (int i = 0; i < 40; ++i) {
    const int threads = c.next();
    c.record(i < 2 ? cold[i] : quiet(threads));
    EXPECT_EQ(c.current(), 2) << "run " << i;
  }
}

TEST(ThreadChooser, OneThreadNeverProbes) {
  ThreadChooser c(1);
  Tally t = simulate(c, 100, quiet, 1);
  EXPECT_EQ(t.at_full, 100);
}

}  // namespace
}  // namespace gaf::runtime
