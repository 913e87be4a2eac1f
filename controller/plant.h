// A plant model for the controller's tests: a small, deterministic simulation of a host whose
// workloads' run-queue latency responds to the knobs a Plan sets. It is not realistic; it is monotone
// in the directions the controller's ladder relies on, and documented so a failing test can be read.
//
// The model, per tick (all workloads on one L3 domain):
// - Each workload spreads its demand d (CPUs) evenly over its cpuset C: q = d / |C| per CPU.
// - CPU time (cpu_usage): each CPU's capacity of 1 is water-filled among the workloads with demand on it
//   in proportion to their shares (nobody gets more than it asks for). cpu_usage = the sum over C.
// - Run-queue p99 of workload v, noiseless:
//     self       = base * (1 + u^2) + contention * max(0, u - 1),  u = q_v (its own load per CPU)
//     wait(c)    = contention * min(others_c, 1) * max(1, q_v + others_c) * (floor + (1 - floor) * phi_c)
//                  for each CPU c of v, others_c = sum of q_w of the other workloads on c,
//                  phi_c = their shares / (theirs + v's)   (0 when nobody else runs on c)
//     shared     = mean of wait(c) over C_v, times 0.9 with steal_task on and |C_v| > 1
//     cache      = 1 + cache_penalty * l3_exposure(v) * sum over other workloads a with demand of
//                  pressure_a * min(d_a, 1) * mba_a / 100,   l3_exposure = 1 - 0.6 * ways_v / total
//                  (1 when v's ways are not partitioned)
//     p99        = (self + shared) * cache
//   so p99 rises with the load on the CPUs v shares, falls with v's weight against theirs, drops to
//   `self` on dedicated CPUs, and improves a little with L3 ways for v and lower MBA for the others.
// - The preemption class (cpu.idle): a workload in it gets a CPU's capacity only after those not in
//   it are served, and counts as 5% of its load in the others' waits (it yields at once; what is
//   left is the wake-up's own preemption); one in it waits for all the others as if it had no weight.
//   A workload with no demand did not wait: p99 = 0 and no waits.
// - Noise: the reported p99 is multiplied by exp(sigma * z), z standard normal from a seeded
//   mt19937_64 (Box-Muller on its raw output, so it is the same on every standard library).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "controller/controller.h"
#include "controller/snapshot.h"
#include "host/cpuset.h"

namespace keel::ctl {

struct PlantWorkload {
  std::string instance;  // the Snapshot's instance name
  std::string workload;  // the config workload's name ("" = the instance name)
  bool critical = false;
  double demand = 0;          // CPUs it would use with nobody in its way
  double base_p99_us = 50;    // its intrinsic run-queue p99 at low load on CPUs of its own
  double cache_pressure = 0;  // 0..1: how much it hurts the others' cache (antagonists)
  // Its knobs as keel finds them; unset = the kernel's defaults (shares 1024, every online CPU).
  std::optional<uint64_t> found_shares;
  std::optional<CpuSet> found_cpus;
};

struct PlantParams {
  double contention_us = 4000;  // wait on a CPU saturated by others at equal weight
  double weight_floor = 0.3;    // the part of that wait an overwhelming weight cannot remove
  double cache_penalty = 0.5;   // p99 factor per unit of the others' cache pressure
  double noise_sigma = 0.1;     // multiplicative log-normal noise on the reported p99s
  unsigned l3_ways = 11;        // ways of the L3 (resctrl cbm_mask bits)
  unsigned mba_min = 10;        // resctrl info/MB/min_bandwidth (also the granularity)
  bool pmu = false;             // report mpki and cache misses
  double period_s = 1.0;
};

// What the simulated kernel holds for one workload.
struct PlantKnobs {
  uint64_t shares = 1024;
  CpuSet cpus;
  unsigned l3_ways = 0;  // 0 = not partitioned (the default group's ways, shared with everyone)
  unsigned mba_percent = 100;
  bool preempt = false;  // in the preemption class (cpu.idle): yields to any other work at once
  bool operator==(const PlantKnobs&) const = default;
};

class Plant {
 public:
  Plant(CpuSet online, std::vector<PlantWorkload> workloads, uint64_t seed, PlantParams params = {});

  // The signals of the next tick under the knobs applied so far (advances the tick and the RNG).
  Snapshot tick();

  // Applies plan.desired as a reconciler and the kernel would: an instance's unset knob (or an
  // instance missing from desired) goes back to as found; shares are clamped to 2..262144, L3 ways to
  // 1..l3_ways, MBA to mba_min..100 rounded up to its granularity; a cpuset that is empty or names
  // CPUs that are not online is refused (the kernel's EINVAL/ENOSPC) and the old one kept. Returns one
  // line per value clamped or refused ("" when the plan was applied as asked).
  std::vector<std::string> apply(const Plan& plan);

  void set_demand(const std::string& instance, double cpus);
  void set_noise(double sigma) { params_.noise_sigma = sigma; }

  const PlantKnobs& knobs(const std::string& instance) const;
  const PlantKnobs& found(const std::string& instance) const;
  bool steal() const { return steal_; }
  const CpuSet& online() const { return online_; }
  const std::vector<PlantWorkload>& workloads() const { return workloads_; }

  // Noiseless model values under the current knobs, for tests and their messages.
  double model_p99_us(const std::string& instance) const;
  double model_usage(const std::string& instance) const;

 private:
  size_t index(const std::string& instance) const;
  std::vector<double> usage() const;  // per workload, CPUs
  double p99(size_t v) const;
  double gaussian();

  CpuSet online_;
  std::vector<PlantWorkload> workloads_;
  std::vector<PlantKnobs> found_;
  std::vector<PlantKnobs> knobs_;
  PlantParams params_;
  std::mt19937_64 rng_;
  uint64_t tick_ = 0;
  bool steal_ = false;
};

// "shares=1024 cpus=0-3 l3=- mba=100", for test messages.
std::string to_string(const PlantKnobs& k);

}  // namespace keel::ctl
