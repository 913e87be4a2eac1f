// SPDX-License-Identifier: GPL-2.0
/*
 * Per-cgroup scheduling signals: run-queue latency (wakeup or preemption to running) as a
 * log-linear histogram, and migrations (all, cross-LLC, cross-NUMA). Latency is charged to the task
 * that waited (`p` at wakeup, `next` at switch), never to `current`. Counters are cumulative: user
 * space diffs two reads, so nothing is lost or counted twice between reads.
 *
 * Per wait the programs read the clock twice (wakeup, switch-in) and the waiting task's storage twice;
 * the waits of a cgroup with a hot slot are counted through the slot the task caches in that storage
 * (an array access), the others through a hash lookup. The kernel's own sched_info cannot stand in for
 * the wakeup stamp: a wake-up that preempts skips the run queue clock's next update, so at that
 * switch-in the clock still reads the wake-up's time and the wait reads ~0 where runqlat sees 8-16 us
 * (bench/README.md, keel_pieces).
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

/* Set by the loader before load. */
const volatile __u32 hierarchy_id = 0; /* key's hierarchy: /proc/cgroups id, 0 = v2 */
const volatile int v1_controller = 0;  /* KEEL_V1_NONE: v2 (dfl_cgrp); else the v1 controller's hierarchy */
const volatile __u32 n_counters = 0;   /* perf counters read per switch; 0 prunes the path at load */
const volatile __u16 llc_of_cpu[KEEL_MAX_CPUS] = {};
const volatile __u16 node_of_cpu[KEEL_MAX_CPUS] = {};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, struct keel_cg_key);
  __type(value, struct keel_cg_stats);
} cg_stats SEC(".maps");

/* Hot slots (sched_shared.h): the array, and which cgroup has which slot. User space assigns and frees
 * them; the programs only look them up. tp_btf only. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1024);
  __type(key, __u32);
  __type(value, struct keel_cg_hot);
} cg_hot SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, struct keel_cg_key);
  __type(value, __u32);
} cg_hot_of SEC(".maps");

/* Bumped by user space when it gives out slots: a task that cached "no slot" looks again. */
__u32 hot_gen = 0;

/* What a tp_btf program keeps per task: its wakeup/preemption stamp, and its cgroup's hot slot as last
 * looked up (slot + 1; 0: none as of hot_gen `gen`). */
struct keel_task {
  __u64 stamp;
  __u64 cgroup_id;
  __u32 slot;
  __u32 gen;
};

/* Wakeup/preemption stamps. tp_btf programs keep them in task storage (no hashing, freed with the
 * task); raw_tp programs cannot use task storage and key a hash by pid. The loader creates only the
 * map its variant uses. */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct keel_task);
} task_stamps SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 32768);
  __type(key, __u32);
  __type(value, __u64);
} pid_stamps SEC(".maps");

/* Perf events per CPU (hardware counters, or software ones where there is no PMU) at index
 * cpu * KEEL_MAX_COUNTERS + k, read at every switch; the difference since the previous switch on
 * that CPU belongs to `prev`. */
struct {
  __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, sizeof(__u32));
} counter_events SEC(".maps");

struct counter_values {
  __u64 v[KEEL_MAX_COUNTERS];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct counter_values);
} counter_last SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, KEEL_ERR_NSLOTS);
  __type(key, __u32);
  __type(value, __u64);
} errors SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KEEL_SLO_WATCH_MAX);
  __type(key, struct keel_cg_key);
  __type(value, struct keel_slo_watch);
} slo_watch SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4096 * 4);
} slo_events SEC(".maps");

/* Set by user space while slo_watch has entries: every other switch skips the lookup. */
__u32 slo_watching = 0;

static const struct keel_cg_stats zero_stats;

static __always_inline void count_error(__u32 slot) {
  __u64* v = bpf_map_lookup_elem(&errors, &slot);
  if (v) *v += 1;
}

/* tp_btf programs get trusted BTF pointers and read fields with plain loads; raw_tp programs must
 * go through bpf_probe_read_kernel. `btf` is a constant in every caller, so each program keeps one
 * of the two paths (a few hundred ns per event on a VM). */
#define KREAD(btf, ptr, field) ((btf) ? (ptr)->field : BPF_CORE_READ(ptr, field))

static __always_inline int subsys_id(void) {
  /* The subsystem's index depends on the kernel's config: relocated from its BTF. */
  if (v1_controller == KEEL_V1_CPUSET) return bpf_core_enum_value(enum cgroup_subsys_id, cpuset_cgrp_id);
  if (v1_controller == KEEL_V1_CPUACCT) return bpf_core_enum_value(enum cgroup_subsys_id, cpuacct_cgrp_id);
  return bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id);
}

static __always_inline __u64 task_cgroup_id(struct task_struct* t, bool btf) {
  struct css_set* cs = KREAD(btf, t, cgroups);
  struct cgroup* cg;
  if (v1_controller == KEEL_V1_NONE) {
    cg = KREAD(btf, cs, dfl_cgrp);
  } else {
    int idx = subsys_id() & 15;
    struct cgroup_subsys_state* css;
    if (btf)
      css = cs->subsys[idx];
    else
      bpf_core_read(&css, sizeof(css), &cs->subsys[idx]);
    cg = KREAD(btf, css, cgroup);
  }
  struct kernfs_node* kn = KREAD(btf, cg, kn);
  return KREAD(btf, kn, id);
}

static __always_inline struct keel_cg_stats* stats_of_key(const struct keel_cg_key* k) {
  struct keel_cg_key key = *k;
  struct keel_cg_stats* s = bpf_map_lookup_elem(&cg_stats, &key);
  if (s) return s;
  if (bpf_map_update_elem(&cg_stats, &key, &zero_stats, BPF_NOEXIST) != 0) {
    s = bpf_map_lookup_elem(&cg_stats, &key); /* lost a race with another CPU: fine */
    if (!s) count_error(KEEL_ERR_CG_MAP_FULL);
    return s;
  }
  return bpf_map_lookup_elem(&cg_stats, &key);
}

static __always_inline struct keel_cg_stats* stats_of(struct task_struct* t, bool btf) {
  struct keel_cg_key key = {.hierarchy = hierarchy_id, .pad = 0, .cgroup_id = task_cgroup_id(t, btf)};
  return stats_of_key(&key);
}

/* The run-queue counts, as keel_cg_stats and keel_cg_hot both start. */
struct keel_rq {
  __u64 rq_hist[KEEL_HIST_SLOTS];
  __u64 rq_sum_ns;
};
_Static_assert(__builtin_offsetof(struct keel_cg_stats, rq_sum_ns) ==
                   __builtin_offsetof(struct keel_rq, rq_sum_ns),
               "keel_cg_stats starts as keel_rq");
_Static_assert(__builtin_offsetof(struct keel_cg_hot, rq_sum_ns) ==
                   __builtin_offsetof(struct keel_rq, rq_sum_ns),
               "keel_cg_hot starts as keel_rq");

static __always_inline struct keel_rq* hot_slot(__u32 slot, __u64 cgroup_id) {
  struct keel_cg_hot* h = bpf_map_lookup_elem(&cg_hot, &slot);
  /* A slot freed or given to another cgroup since it was cached is not this cgroup's. */
  if (!h || h->key.cgroup_id != cgroup_id) return NULL;
  return (struct keel_rq*)h;
}

/* Where a wait of `key`'s cgroup is counted: its hot slot when it has one, found through the waiting
 * task's cache (`task`, tp_btf; NULL for raw_tp, which has no task storage) without a hash lookup while
 * the task stays in the cgroup; else its cg_stats entry. */
static __always_inline struct keel_rq* rq_counts(const struct keel_cg_key* key, struct keel_task* task) {
  if (task) {
    __u32 gen = hot_gen;
    if (task->cgroup_id == key->cgroup_id) {
      if (task->slot != 0) {
        struct keel_rq* rq = hot_slot(task->slot - 1, key->cgroup_id);
        if (rq) return rq;
      } else if (task->gen == gen) {
        return (struct keel_rq*)stats_of_key(key); /* no slot, and none given out since */
      }
    }
    struct keel_cg_key k = *key;
    __u32* at = bpf_map_lookup_elem(&cg_hot_of, &k);
    __u32 slot = at ? *at : 0;
    struct keel_rq* rq = at ? hot_slot(slot, key->cgroup_id) : NULL;
    task->cgroup_id = key->cgroup_id;
    task->gen = gen;
    task->slot = rq ? slot + 1 : 0;
    if (rq) return rq;
  }
  return (struct keel_rq*)stats_of_key(key);
}

static __always_inline __u32 log2_u64(__u64 v) {
  __u32 r = 0, shift;
  shift = (v > 0xFFFFFFFFULL) << 5;
  v >>= shift;
  r |= shift;
  shift = (v > 0xFFFF) << 4;
  v >>= shift;
  r |= shift;
  shift = (v > 0xFF) << 3;
  v >>= shift;
  r |= shift;
  shift = (v > 0xF) << 2;
  v >>= shift;
  r |= shift;
  shift = (v > 0x3) << 1;
  v >>= shift;
  r |= shift;
  r |= (v >> 1);
  return r;
}

static __always_inline __u32 hist_bucket(__u64 delta_ns) {
  __u64 us = delta_ns / 1000;
  if (us < KEEL_HIST_SUB) return (__u32)us;
  __u32 p = log2_u64(us);
  if (p >= KEEL_HIST_MAX_POW) return KEEL_HIST_BUCKETS - 1;
  __u32 sub = (__u32)(us >> (p - KEEL_HIST_SUB_BITS)) & (KEEL_HIST_SUB - 1);
  return KEEL_HIST_SUB + (p - KEEL_HIST_SUB_BITS) * KEEL_HIST_SUB + sub;
}

static __always_inline void stamp(struct task_struct* t, __u64 now, bool btf) {
  __u32 pid = KREAD(btf, t, pid);
  if (pid == 0) return; /* idle */
  if (btf) {
    struct keel_task* v = bpf_task_storage_get(&task_stamps, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (v)
      v->stamp = now;
    else
      count_error(KEEL_ERR_STAMP_FULL);
  } else if (bpf_map_update_elem(&pid_stamps, &pid, &now, BPF_ANY) != 0) {
    count_error(KEEL_ERR_STAMP_FULL);
  }
}

/* The stamp of `t`, consumed (0 when there is none); `*task`: its task storage (tp_btf). */
static __always_inline __u64 take_stamp(struct task_struct* t, __u32 pid, bool btf, struct keel_task** task) {
  __u64 ts = 0;
  if (btf) {
    struct keel_task* v = bpf_task_storage_get(&task_stamps, t, 0, 0);
    if (v) {
      ts = v->stamp;
      v->stamp = 0;
    }
    *task = v;
  } else {
    __u64* v = bpf_map_lookup_elem(&pid_stamps, &pid);
    if (v) {
      ts = *v;
      bpf_map_delete_elem(&pid_stamps, &pid);
    }
  }
  return ts;
}

static __always_inline unsigned int task_state(struct task_struct* t, bool btf) {
  if (bpf_core_field_exists(t->__state)) return KREAD(btf, t, __state);
  struct task_struct___pre514* old = (void*)t;
  return (unsigned int)BPF_CORE_READ(old, state);
}

static __always_inline void charge_counters(struct task_struct* prev, bool btf) {
  __u32 zero = 0;
  struct counter_values* last = bpf_map_lookup_elem(&counter_last, &zero);
  if (!last) return;
  __u64 delta[KEEL_MAX_COUNTERS] = {};
  bool any = false;
  __u64 base = (__u64)bpf_get_smp_processor_id() * KEEL_MAX_COUNTERS;
  for (__u32 k = 0; k < KEEL_MAX_COUNTERS; k++) {
    if (k >= n_counters) break; /* a .rodata constant: the unused reads are pruned at load */
    struct bpf_perf_event_value v = {};
    if (bpf_perf_event_read_value(&counter_events, (base + k) & BPF_F_INDEX_MASK, &v, sizeof(v)) != 0)
      continue;
    __u64 was = last->v[k];
    last->v[k] = v.counter;
    /* The first read on a CPU only sets the base. */
    if (was != 0 && v.counter > was) {
      delta[k] = v.counter - was;
      any = true;
    }
  }
  if (!any || KREAD(btf, prev, pid) == 0) return; /* idle's share is nobody's */
  struct keel_cg_stats* s = stats_of(prev, btf);
  if (!s) return;
  for (__u32 k = 0; k < KEEL_MAX_COUNTERS; k++) {
    if (k >= n_counters) break;
    if (delta[k]) __sync_fetch_and_add(&s->counters[k], delta[k]);
  }
}

/* A wait of a watched cgroup over its SLO: counted in the current window (once more per long_us it
 * lasted); the one that makes the count reach the threshold wakes keel (one event per window: the count
 * only grows within one, so one wait takes it across; races between CPUs can only delay a window's
 * reset or send its event from either CPU, never twice for one count). */
static __always_inline void watch_slo(const struct keel_cg_key* key, __u64 now, __u64 delta) {
  struct keel_slo_watch* w = bpf_map_lookup_elem(&slo_watch, key);
  if (!w || delta <= w->slo_ns) return;
  if (now - w->window_start > w->window_ns) {
    w->window_start = now;
    w->over = 0;
  }
  __u64 weight = 1;
  if (w->long_us) weight += delta / ((__u64)w->long_us * 1000);
  __u64 was = __sync_fetch_and_add(&w->over, weight);
  __u64 n = was + weight;
  if (was >= w->threshold || n < w->threshold) return;
  struct keel_slo_event* e = bpf_ringbuf_reserve(&slo_events, sizeof(*e), 0);
  if (!e) return;
  e->key = *key;
  e->at_ns = now;
  e->wait_ns = delta;
  e->over = n;
  bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

static __always_inline int on_switch(bool preempt, struct task_struct* prev, struct task_struct* next,
                                     bool btf) {
  if (n_counters) charge_counters(prev, btf);
  /* The clock is read only when a stamp or a wait needs it (a read is the costliest piece of a wait,
   * ~90 ns on a VM: bench/README.md), and once for both: switches to idle, or to a task with no stamp,
   * and from a task that sleeps, read none or one. */
  __u64 now = 0;
  /* prev goes back to the run queue when preempted or still runnable: it waits from now. Idle (pid 0)
   * is always runnable and never waits. */
  if (KREAD(btf, prev, pid) != 0 && (preempt || task_state(prev, btf) == 0)) {
    now = bpf_ktime_get_ns();
    stamp(prev, now, btf);
  }
  __u32 pid = KREAD(btf, next, pid);
  if (pid == 0) return 0;
  struct keel_task* task = NULL;
  __u64 ts = take_stamp(next, pid, btf, &task);
  if (ts == 0) return 0;
  if (now == 0) now = bpf_ktime_get_ns();
  __u64 delta = now > ts ? now - ts : 0;
  struct keel_cg_key key = {.hierarchy = hierarchy_id, .pad = 0, .cgroup_id = task_cgroup_id(next, btf)};
  struct keel_rq* rq = rq_counts(&key, task);
  if (!rq) return 0;
  __u32 b = hist_bucket(delta);
  /* The mask is what the verifier can follow through the compiler's register moves. */
  __sync_fetch_and_add(&rq->rq_hist[b & (KEEL_HIST_SLOTS - 1)], 1);
  __sync_fetch_and_add(&rq->rq_sum_ns, delta);
  if (slo_watching) watch_slo(&key, now, delta);
  return 0;
}

static __always_inline int on_migrate(struct task_struct* p, int dest_cpu, bool btf) {
  __u32 src;
  struct task_struct___cpu* old = (void*)p;
  if (bpf_core_field_exists(old->cpu))
    src = KREAD(btf, old, cpu);
  else
    src = btf ? p->thread_info.cpu : BPF_CORE_READ(p, thread_info.cpu);
  __u32 dst = (__u32)dest_cpu;
  if (src == dst) return 0;
  struct keel_cg_stats* s = stats_of(p, btf);
  if (!s) return 0;
  __sync_fetch_and_add(&s->migrations, 1);
  if (src < KEEL_MAX_CPUS && dst < KEEL_MAX_CPUS) {
    /* Masks the verifier can follow; the barrier stops clang from dropping them as redundant. */
    __u32 a = src, b = dst;
    asm volatile("" : "+r"(a), "+r"(b));
    a &= KEEL_MAX_CPUS - 1;
    b &= KEEL_MAX_CPUS - 1;
    /* One scope per migration, so the scopes add up to the whole: another NUMA node, else another LLC
     * on the same node (with sub-NUMA clustering an LLC spans nodes: those count as cross_numa). */
    if (node_of_cpu[a] != node_of_cpu[b])
      __sync_fetch_and_add(&s->cross_numa, 1);
    else if (llc_of_cpu[a] != llc_of_cpu[b])
      __sync_fetch_and_add(&s->cross_llc, 1);
  }
  return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(keel_wakeup_btf, struct task_struct* p) {
  stamp(p, bpf_ktime_get_ns(), true);
  return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(keel_wakeup_new_btf, struct task_struct* p) {
  stamp(p, bpf_ktime_get_ns(), true);
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(keel_switch_btf, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return on_switch(preempt, prev, next, true);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(keel_migrate_btf, struct task_struct* p, int dest_cpu) { return on_migrate(p, dest_cpu, true); }

SEC("raw_tp/sched_wakeup")
int BPF_PROG(keel_wakeup_raw, struct task_struct* p) {
  stamp(p, bpf_ktime_get_ns(), false);
  return 0;
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(keel_wakeup_new_raw, struct task_struct* p) {
  stamp(p, bpf_ktime_get_ns(), false);
  return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(keel_switch_raw, bool preempt, struct task_struct* prev, struct task_struct* next) {
  return on_switch(preempt, prev, next, false);
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(keel_migrate_raw, struct task_struct* p, int dest_cpu) { return on_migrate(p, dest_cpu, false); }
