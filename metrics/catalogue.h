// Every metric keel exports: name, type, labels and help, in one place. The exporter registers exactly
// these; the dashboards, alert rules and their tests are checked against this list.
#pragma once

#include <string_view>

namespace keel::metrics {

enum class Type { counter, gauge, histogram };

struct MetricDef {
  std::string_view name;
  Type type;
  std::string_view labels;  // comma-separated label names, "" for none
  std::string_view help;
};

// Label values: workload = a workload instance ("redis", "batch/job-1"; its name as label_value in
// metrics.h makes it, as is every label value), or "other" for cgroups no workload matches and instances
// past the series cap; class = critical | best_effort | other;
// knob = cpus | shares | l3_ways | mba_percent | steal_task | class (workload="host" for steal_task);
// direction = act | give_back | revert; mode = enforce | observe; scope = same_llc | cross_llc | cross_numa
// (disjoint: within one LLC, to another LLC of the same NUMA node, to another NUMA node; their sum is
// every migration).
inline constexpr MetricDef kCatalogue[] = {
    // Interference: what the workloads feel and who causes it.
    {"keel_runqueue_latency_seconds", Type::histogram, "workload,class",
     "Time a task waited runnable on a run queue before it ran, per wait (keel's BPF histogram; its bucket "
     "bounds up to 1 ms, powers of two above)"},
    {"keel_runqueue_latency_p99_seconds", Type::gauge, "workload",
     "The smoothed run-queue latency p99 the controller judges a workload with an SLO by"},
    {"keel_slo_target_seconds", Type::gauge, "workload",
     "The run-queue latency p99 the workload's SLO allows"},
    {"keel_slo_slack_ratio", Type::gauge, "workload",
     "(target - value) / target of the binding SLO signal; below 0 the SLO is violated"},
    {"keel_slo_violated", Type::gauge, "workload",
     "1 while the controller counts the workload's SLO as violated"},
    {"keel_migrations_total", Type::counter, "workload,scope",
     "Task migrations between CPUs by scope: within an LLC, to another LLC of the same NUMA node, to "
     "another NUMA node (disjoint: the sum is every migration)"},
    {"keel_cpu_usage_seconds_total", Type::counter, "workload,class",
     "CPU time the workload's cgroups used (cgroupfs)"},
    {"keel_cpu_throttled_periods_total", Type::counter, "workload",
     "CFS periods in which the workload's cgroups were throttled by their CPU quota (cgroupfs nr_throttled)"},
    {"keel_cache_misses_total", Type::counter, "workload",
     "LLC misses while the workload ran (only with a hardware PMU)"},
    {"keel_instructions_total", Type::counter, "workload",
     "Instructions retired while the workload ran (only with a hardware PMU)"},
    {"keel_interference_detected", Type::gauge, "workload,antagonist",
     "1 while the workload's SLO is at risk and the antagonist is among the top 5 using its CPUs (series "
     "removed when it ends)"},
    {"keel_antagonist_score", Type::gauge, "workload,antagonist",
     "CPUs the antagonist keeps busy or queued on the victim's CPUs (MPKI-weighted with a PMU)"},
    // Controller: knobs, actions, mode.
    {"keel_knob_value", Type::gauge, "workload,knob",
     "A knob's value in effect: cpus = CPUs in its cpuset, shares = cpu.shares (v2 weight mapped), as "
     "sensed; class 1/0 (in the preemption class: as keel sets it in enforce mode, as sensed in observe "
     "mode); l3_ways, mba_percent, steal_task 0/1 while keel sets them (enforce mode)"},
    {"keel_controller_rung", Type::gauge, "workload",
     "Ladder steps keel holds for the workload (0 = nothing applied)"},
    {"keel_controller_blocked", Type::gauge, "workload",
     "1 while the workload is violated and no step is possible (bounds, placement, lockouts)"},
    {"keel_actions_total", Type::counter, "knob,direction,mode",
     "Controller actions (observe: actions it would take)"},
    {"keel_mode", Type::gauge, "mode", "1 for the mode keel runs in (the other mode has no series)"},
    {"keel_workload_instances", Type::gauge, "class", "Managed workload instances this tick"},
    {"keel_starvation_lifts_total", Type::counter, "",
     "Times a best-effort instance starved in the preemption class for actuators.starvation_limit and "
     "had it lifted for a tick"},
    {"keel_metrics_folded_instances", Type::gauge, "",
     "Workload instances past the series cap, counted under workload=\"other\""},
    // keel's health.
    {"keel_tick_duration_seconds", Type::histogram, "", "Time one sense-decide-act tick took"},
    {"keel_ticks_total", Type::counter, "", "Ticks run"},
    {"keel_last_tick_timestamp_seconds", Type::gauge, "", "Unix time the latest tick finished"},
    {"keel_errors_total", Type::counter, "kind", "Errors: kind = sensing | actuator"},
    {"keel_drift_total", Type::counter, "",
     "Knobs keel wrote that another manager (kubelet, systemd, docker update) changed since: each given "
     "up and left alone for a lockout, never written back in a write-war"},
    {"keel_sensor_available", Type::gauge, "sensor",
     "1 when the sensor works here: runqueue, hardware_counters"},
    {"keel_mechanism_enabled", Type::gauge, "mechanism",
     "1 when the config enables the actuator and the host has it (observe mode: what keel would use): "
     "cpuset, cpu_weight, resctrl, steal_task, irq_affinity, preempt_class"},
    {"keel_bpf_run_time_seconds_total", Type::counter, "program",
     "Run time of keel's BPF programs while BPF stats were on"},
    {"keel_bpf_run_count_total", Type::counter, "program",
     "Runs of keel's BPF programs while BPF stats were on"},
    {"keel_bpf_cost_seconds_per_event", Type::gauge, "",
     "Mean run time of keel's BPF programs over the latest sampled window"},
    {"keel_bpf_events_per_second", Type::gauge, "",
     "Runs of keel's BPF programs per second over the latest sampled window"},
    {"keel_bpf_cpu_ratio", Type::gauge, "", "Share of one CPU keel's BPF programs take (cost x events/s)"},
    {"keel_bpf_map_entries", Type::gauge, "map", "Entries in use in a BPF map"},
    {"keel_bpf_map_max_entries", Type::gauge, "map", "Capacity of a BPF map"},
    {"keel_bpf_dropped_total", Type::counter, "reason",
     "Events the BPF programs could not record: reason = map_full | stamp_full"},
    {"keel_bpf_map_evictions_total", Type::counter, "reason",
     "Entries keel removed from the per-cgroup BPF map to keep room: reason = gone | idle | unmatched | "
     "best_effort"},
    {"process_cpu_seconds_total", Type::counter, "", "CPU time keel itself used (user + system)"},
    {"process_resident_memory_bytes", Type::gauge, "", "keel's resident memory"},
    {"keel_build_info", Type::gauge, "version,revision,compiler,libbpf",
     "1, labelled with keel's version, the git revision it was built from, the compiler and the libbpf it "
     "runs with (as keel --version prints them)"},
};

}  // namespace keel::metrics
