// SPDX-License-Identifier: GPL-2.0
/*
 * What each piece of a sched_switch program costs (bench/pieces.cpp): one program per piece, each
 * doing only that on tp_btf/sched_switch, timed by the kernel's BPF run-time stats one at a time.
 * `empty` is the floor every piece's time includes. `stale` measures how far the run queue's clock is
 * behind the real one at switch-in (a wake-up that preempts skips the next clock update): what rules
 * out taking waits from the kernel's sched_info without a clock read of keel's own.
 */
// The kernel headers must come in this order.
// clang-format off
#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
// clang-format on

#include "keel_core.h"
#include "sched_shared.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, struct keel_cg_key);
  __type(value, struct keel_cg_stats);
} hash SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
  __uint(max_entries, 4096);
  __type(key, struct keel_cg_key);
  __type(value, struct keel_cg_stats);
} percpu_hash SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct keel_cg_stats);
} array SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, __u64);
} storage SEC(".maps");

/* The stale piece's findings: how far (ktime - rq clock) at switch-in is above its smallest value. */
struct staleness {
  __s64 min;
  __u64 n, over_200ns, over_1us, over_5us;
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct staleness);
} stale_stats SEC(".maps");

__u64 sink;
static const struct keel_cg_stats zero_stats;

SEC("tp_btf/sched_switch")
int BPF_PROG(piece_empty) { return 0; }

SEC("tp_btf/sched_switch")
int BPF_PROG(piece_clock) {
  sink = bpf_ktime_get_ns();
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(piece_task_storage, bool preempt, struct task_struct* prev, struct task_struct* next) {
  __u64* v = bpf_task_storage_get(&storage, next, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (v) *v += 1;
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(piece_cgroup_id, bool preempt, struct task_struct* prev, struct task_struct* next) {
  sink = next->cgroups->subsys[bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id) & 15]->cgroup->kn->id;
  return 0;
}

/* The per-cgroup entry as keel updates it: a hash lookup by (hierarchy, id) and two atomic adds. */
SEC("tp_btf/sched_switch")
int BPF_PROG(piece_hash_update) {
  struct keel_cg_key k = {.hierarchy = 1, .pad = 0, .cgroup_id = 1};
  struct keel_cg_stats* s = bpf_map_lookup_elem(&hash, &k);
  if (!s) {
    bpf_map_update_elem(&hash, &k, &zero_stats, BPF_NOEXIST);
    return 0;
  }
  __sync_fetch_and_add(&s->rq_hist[5], 1);
  __sync_fetch_and_add(&s->rq_sum_ns, 77);
  return 0;
}

/* The same with per-CPU values: plain adds, no line shared between CPUs. */
SEC("tp_btf/sched_switch")
int BPF_PROG(piece_percpu_hash_update) {
  struct keel_cg_key k = {.hierarchy = 1, .pad = 0, .cgroup_id = 1};
  struct keel_cg_stats* s = bpf_map_lookup_elem(&percpu_hash, &k);
  if (!s) {
    bpf_map_update_elem(&percpu_hash, &k, &zero_stats, BPF_NOEXIST);
    return 0;
  }
  s->rq_hist[5] += 1;
  s->rq_sum_ns += 77;
  return 0;
}

/* The same through an array slot (what a slot cached per task would cost). */
SEC("tp_btf/sched_switch")
int BPF_PROG(piece_array_update) {
  __u32 slot = 7;
  struct keel_cg_stats* s = bpf_map_lookup_elem(&array, &slot);
  if (!s) return 0;
  __sync_fetch_and_add(&s->rq_hist[5], 1);
  __sync_fetch_and_add(&s->rq_sum_ns, 77);
  return 0;
}

/* The kernel's own record of next's wait: rq clock and sched_info (CONFIG_SCHED_INFO). */
SEC("tp_btf/sched_switch")
int BPF_PROG(piece_sched_info, bool preempt, struct task_struct* prev, struct task_struct* next) {
  sink = next->se.cfs_rq->rq->clock - next->sched_info.last_queued + next->sched_info.run_delay;
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(piece_stale, bool preempt, struct task_struct* prev, struct task_struct* next) {
  if (next->pid == 0 || next->sched_info.last_queued == 0) return 0;
  __s64 d = (__s64)(bpf_ktime_get_ns() - next->se.cfs_rq->rq->clock);
  __u32 zero = 0;
  struct staleness* s = bpf_map_lookup_elem(&stale_stats, &zero);
  if (!s) return 0;
  if (s->n == 0 || d < s->min) s->min = d;
  s->n++;
  __s64 e = d - s->min;
  if (e > 200) s->over_200ns++;
  if (e > 1000) s->over_1us++;
  if (e > 5000) s->over_5us++;
  return 0;
}
