// What the running kernel offers keel's sensors, found by trying (loading programs, opening
// events) rather than by version numbers; and the smallest real BPF program keel ships.
#pragma once

#include <cstdint>
#include <string>

#include "bpf/skeleton.h"
#include "host/error.h"
#include "host/sys_roots.h"

struct keel_probe;  // bpftool skeleton of bpf/probe.bpf.c

namespace keel::bpf {

enum class AttachKind { tp_btf, raw_tp };
enum class AttachChoice { automatic, tp_btf, raw_tp };
const char* to_string(AttachKind k);

struct KernelFeatures {
  bool btf = false;     // <sys>/kernel/btf/vmlinux exists (CO-RE and tp_btf need it)
  bool tp_btf = false;  // a tp_btf program loads and attaches
  std::string tp_btf_error;
  bool raw_tp = false;  // a raw_tp program loads and attaches
  std::string raw_tp_error;
  bool hw_pmu = false;       // a hardware cache-miss counter opens
  std::string hw_pmu_error;  // why not (ENOENT on VMs without a virtual PMU)
  bool sw_events = false;    // a software task-clock counter opens (stand-in for tests)
  std::string sw_events_error;
  bool bpf_stats = false;  // BPF_ENABLE_STATS turns run-time stats on (then off again at once)
  std::string bpf_stats_error;
};

KernelFeatures probe_features(const SysRoots& roots);
// Only the PMU part of probe_features: opens (and closes) a hardware cache-miss counter.
Result<void> hw_pmu_available();

// The probe program, loaded: counts sched_switch events on every CPU.
class SwitchCounter {
 public:
  static Result<SwitchCounter> open(AttachChoice choice = AttachChoice::automatic);

  AttachKind kind() const { return kind_; }
  // Context switches counted on all CPUs since attach.
  Result<uint64_t> switches() const;

 private:
  SwitchCounter(Skeleton<keel_probe> skel, AttachKind kind) : skel_(std::move(skel)), kind_(kind) {}
  Skeleton<keel_probe> skel_;
  AttachKind kind_ = AttachKind::tp_btf;
};

}  // namespace keel::bpf
