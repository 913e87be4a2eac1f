#include "controller/plant.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace keel::ctl {

namespace {

constexpr uint64_t kSharesMin = 2;
constexpr uint64_t kSharesMax = 262144;

// Water-fills `capacity` among claims in proportion to weights (CFS shares): whoever claims no more than
// its weighted part of what is left gets its claim; the rest share what remains by weight.
std::vector<double> water_fill(const std::vector<double>& claim, const std::vector<double>& weight,
                               double capacity) {
  std::vector<double> got(claim.size(), 0);
  std::vector<bool> done(claim.size(), false);
  double left = capacity;
  for (bool satisfied_some = true; satisfied_some;) {
    satisfied_some = false;
    double wsum = 0;
    for (size_t i = 0; i < claim.size(); ++i)
      if (!done[i]) wsum += weight[i];
    if (wsum <= 0) break;
    const double per_weight = left / wsum;
    for (size_t i = 0; i < claim.size(); ++i)
      if (!done[i] && claim[i] <= per_weight * weight[i]) {
        got[i] = claim[i];
        left -= claim[i];
        done[i] = satisfied_some = true;
      }
    if (!satisfied_some)
      for (size_t i = 0; i < claim.size(); ++i)
        if (!done[i]) got[i] = per_weight * weight[i];
  }
  return got;
}

}  // namespace

std::string to_string(const PlantKnobs& k) {
  return "shares=" + std::to_string(k.shares) + " cpus=" + k.cpus.to_list() +
         " l3=" + (k.l3_ways ? std::to_string(k.l3_ways) : std::string("-")) +
         " mba=" + std::to_string(k.mba_percent) + (k.preempt ? " class" : "");
}

Plant::Plant(CpuSet online, std::vector<PlantWorkload> workloads, uint64_t seed, PlantParams params)
    : online_(std::move(online)), workloads_(std::move(workloads)), params_(params), rng_(seed) {
  if (online_.empty()) throw std::invalid_argument("plant: no CPUs");
  for (auto& w : workloads_) {
    if (w.workload.empty()) w.workload = w.instance;
    PlantKnobs k;
    k.shares = w.found_shares.value_or(1024);
    k.cpus = w.found_cpus ? (*w.found_cpus & online_) : online_;
    if (k.cpus.empty()) throw std::invalid_argument("plant: " + w.instance + " found with no online CPU");
    found_.push_back(k);
  }
  knobs_ = found_;
}

size_t Plant::index(const std::string& instance) const {
  for (size_t i = 0; i < workloads_.size(); ++i)
    if (workloads_[i].instance == instance) return i;
  throw std::out_of_range("plant: no workload " + instance);
}

const PlantKnobs& Plant::knobs(const std::string& instance) const { return knobs_[index(instance)]; }
const PlantKnobs& Plant::found(const std::string& instance) const { return found_[index(instance)]; }

void Plant::set_demand(const std::string& instance, double cpus) {
  workloads_[index(instance)].demand = cpus;
}

double Plant::gaussian() {
  // Box-Muller on the engine's raw 64-bit output: identical on every standard library.
  auto unit = [&] { return (static_cast<double>(rng_() >> 11) + 0.5) * 0x1.0p-53; };
  double u1 = unit();
  double u2 = unit();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::vector<double> Plant::usage() const {
  std::vector<double> used(workloads_.size(), 0);
  for (unsigned c : online_.cpus()) {
    // Those outside the class first; those in it share what is left.
    double left = 1.0;
    for (bool in_class : {false, true}) {
      std::vector<size_t> who;
      std::vector<double> claim, weight;
      for (size_t i = 0; i < workloads_.size(); ++i) {
        if (workloads_[i].demand <= 0 || !knobs_[i].cpus.contains(c) || knobs_[i].preempt != in_class)
          continue;
        who.push_back(i);
        claim.push_back(workloads_[i].demand / knobs_[i].cpus.count());
        weight.push_back(static_cast<double>(knobs_[i].shares));
      }
      auto got = water_fill(claim, weight, left);
      for (size_t j = 0; j < who.size(); ++j) {
        used[who[j]] += got[j];
        left -= got[j];
      }
      left = std::max(0.0, left);
    }
  }
  return used;
}

double Plant::p99(size_t v) const {
  const PlantWorkload& w = workloads_[v];
  const PlantKnobs& k = knobs_[v];
  if (w.demand <= 0) return 0;
  const double n = k.cpus.count();
  const double u = w.demand / n;
  double self = w.base_p99_us * (1 + u * u) + params_.contention_us * std::max(0.0, u - 1);

  double shared = 0;
  for (unsigned c : k.cpus.cpus()) {
    double others = 0, their_shares = 0;
    for (size_t i = 0; i < workloads_.size(); ++i) {
      if (i == v || workloads_[i].demand <= 0 || !knobs_[i].cpus.contains(c)) continue;
      const double q = workloads_[i].demand / knobs_[i].cpus.count();
      if (knobs_[i].preempt && !k.preempt) {  // it yields at once
        others += 0.05 * q;
        their_shares += 2;
      } else if (k.preempt && !knobs_[i].preempt) {  // v yields to it
        others += q;
        their_shares += 1e6;
      } else {
        others += q;
        their_shares += static_cast<double>(knobs_[i].shares);
      }
    }
    if (others <= 0) continue;
    double phi = their_shares / (their_shares + static_cast<double>(k.shares));
    shared += params_.contention_us * std::min(others, 1.0) * std::max(1.0, u + others) *
              (params_.weight_floor + (1 - params_.weight_floor) * phi);
  }
  shared /= n;
  if (steal_ && k.cpus.count() > 1) shared *= 0.9;

  double pressure = 0;
  for (size_t i = 0; i < workloads_.size(); ++i) {
    if (i == v || workloads_[i].demand <= 0) continue;
    pressure +=
        workloads_[i].cache_pressure * std::min(workloads_[i].demand, 1.0) * knobs_[i].mba_percent / 100.0;
  }
  double exposure = k.l3_ways ? 1 - 0.6 * k.l3_ways / static_cast<double>(params_.l3_ways) : 1.0;
  return (self + shared) * (1 + params_.cache_penalty * exposure * pressure);
}

double Plant::model_p99_us(const std::string& instance) const { return p99(index(instance)); }
double Plant::model_usage(const std::string& instance) const { return usage()[index(instance)]; }

Snapshot Plant::tick() {
  Snapshot s;
  s.tick = ++tick_;
  s.period_s = params_.period_s;
  auto used = usage();
  for (size_t i = 0; i < workloads_.size(); ++i) {
    const PlantWorkload& w = workloads_[i];
    WorkloadSignals sig;
    sig.instance = w.instance;
    sig.workload = w.workload;
    sig.critical = w.critical;
    sig.cgroups = {"/plant/" + w.instance};
    double noise = std::exp(params_.noise_sigma * gaussian());  // drawn for every workload: stable RNG use
    double p = p99(i);
    if (p > 0) {
      sig.rq_p99_us = p * noise;
      sig.rq_p50_us = sig.rq_p99_us / 5;
      sig.rq_waits = static_cast<uint64_t>(std::llround(used[i] * 1000 * params_.period_s)) + 1;
    }
    sig.cpu_usage = used[i];
    sig.throttled_per_s = 0.0;
    if (params_.pmu) {
      sig.mpki = 1 + 30 * w.cache_pressure;
      sig.cache_misses_per_s = *sig.mpki * used[i] * 1e6;  // 1e9 instructions per CPU-second
    }
    sig.cpus = knobs_[i].cpus;
    sig.shares = knobs_[i].preempt ? 3 : knobs_[i].shares;  // the kernel's weight in the class
    s.workloads.push_back(std::move(sig));
  }
  return s;
}

std::vector<std::string> Plant::apply(const Plan& plan) {
  std::vector<std::string> notes;
  for (size_t i = 0; i < workloads_.size(); ++i) {
    const std::string& name = workloads_[i].instance;
    auto it = plan.desired.find(name);
    KnobState want = it == plan.desired.end() ? KnobState{} : it->second;
    PlantKnobs& k = knobs_[i];
    k.preempt = in_class(plan, name);

    uint64_t shares = want.shares.value_or(found_[i].shares);
    k.shares = std::clamp(shares, kSharesMin, kSharesMax);
    if (k.shares != shares) notes.push_back(name + ": shares " + std::to_string(shares) + " clamped");

    CpuSet cpus = want.cpus.value_or(found_[i].cpus);
    if (cpus.empty())
      notes.push_back(name + ": empty cpuset refused, kept " + k.cpus.to_list());
    else if (!cpus.subset_of(online_))
      notes.push_back(name + ": cpuset " + cpus.to_list() + " not online, refused");
    else
      k.cpus = cpus;

    if (want.l3_ways) {
      unsigned ways = std::clamp(*want.l3_ways, 1u, params_.l3_ways);
      if (ways != *want.l3_ways)
        notes.push_back(name + ": l3_ways " + std::to_string(*want.l3_ways) + " clamped");
      k.l3_ways = ways;
    } else {
      k.l3_ways = found_[i].l3_ways;
    }

    if (want.mba_percent) {
      unsigned g = std::max(1u, params_.mba_min);
      unsigned mba = std::clamp(*want.mba_percent, params_.mba_min, 100u);
      mba = std::min(100u, (mba + g - 1) / g * g);
      if (mba != *want.mba_percent)
        notes.push_back(name + ": mba " + std::to_string(*want.mba_percent) + " set as " +
                        std::to_string(mba));
      k.mba_percent = mba;
    } else {
      k.mba_percent = found_[i].mba_percent;
    }
  }
  steal_ = plan.steal;
  return notes;
}

}  // namespace keel::ctl
