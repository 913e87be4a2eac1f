// Bounds for tests that compare times, rates or latencies, taken from what the same run measures of
// this machine instead of constants tuned on one of them. The development machines differ from day to
// day (an AMD or an Intel host, a neighbour on the other CPU, the v2 guest's emulated CPUs), so a test
// says what its truth is (the kernel's count of a task's wake-ups, the work a worker did, the machine's
// own wake-up latency alone) and bounds what it checks by that.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace keel::testing {

// CLOCK_MONOTONIC in ns.
uint64_t now_ns();

// What the kernel counted of one task: /proc/PID/status (context switches), /proc/PID/stat (minor
// faults), /proc/PID/schedstat (time on a CPU, time waiting runnable, times switched in) and
// /proc/PID/sched (migrations; where the kernel has CONFIG_SCHED_DEBUG, else 0). A task that sleeps and
// wakes counts one voluntary switch per wake-up: the truth for "it woke N times".
struct TaskCounts {
  uint64_t voluntary = 0, involuntary = 0, minflt = 0, migrations = 0;
  uint64_t run_ns = 0, wait_ns = 0, slices = 0;
  uint64_t switches() const { return voluntary + involuntary; }
  // The counts between an earlier reading and this one.
  TaskCounts since(const TaskCounts& earlier) const;
  // The mean run-queue wait per time on a CPU (us); 0 when it was never switched in.
  double mean_wait_us() const;
};
TaskCounts task_counts(pid_t pid);

// The state letter of /proc/PID/stat ('S' sleeping, 'T' stopped, 'R' running; 0 when it is gone).
char task_state(pid_t pid);
// Waits (up to 5 s) until the task's state is `state`; whether it got there.
bool wait_state(pid_t pid, char state);

// CPU time that is no task's, in ns: interrupts, softirqs and what the hypervisor stole (/proc/stat's
// irq, softirq and steal columns) of CPU `cpu`, or of all CPUs with -1. A CPU's clock counts it; the
// task it interrupted is not charged for it.
double not_tasks_ns(int cpu = -1);
// The hypervisor's steal alone (ns), of one CPU or all (-1).
double steal_ns(int cpu = -1);

// Polls `cond` every `every` until it holds or `limit` has passed; whether it held. For "keel does X
// in time": only the deadline is a constant, and it is generous, never the measure.
bool eventually(const std::function<bool()>& cond, std::chrono::milliseconds limit,
                std::chrono::milliseconds every = std::chrono::milliseconds(10));

// How long a task that sleeps `period` at a time is late waking on this machine now, measured on `cpu`
// by a child of its own (timer slack 1 ns) for `span`: the lateness quantiles (us) and the mean
// run-queue wait per wake-up (us, the kernel's schedstat). The floor under any latency a test expects
// of a sleeper: an idle vCPU that the host wakes late, a neighbour on the CPU, an emulator.
struct WakeFloor {
  double p50_us = 0, p99_us = 0, wait_us = 0;
  size_t wakes = 0;
  std::string str() const;  // "p50 12 us, p99 80 us, mean wait 3.1 us over 1740 wake-ups"
};
WakeFloor wake_floor(int cpu, std::chrono::microseconds period = std::chrono::microseconds(1000),
                     std::chrono::milliseconds span = std::chrono::milliseconds(1000));

// What one switch between two tasks on `cpu` costs here now (ns): two children pinned there hand a byte
// back and forth over pipes `rounds` times, each hand-over a wake-up and a switch. The unit for bounds on
// what a count taken at switches may differ from one taken elsewhere, per switch.
double switch_cost_ns(int cpu, int rounds = 2000);

// A latency bound for the run: `base` (what the test is written for) or, where this machine's own
// floor is higher, `factor` times that floor, so a test's SLO is one the machine can meet alone.
double bound_above_floor(double base_us, double floor_us, double factor = 3.0);

}  // namespace keel::testing
