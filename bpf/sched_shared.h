/* Shared by sched.bpf.c and the C++ sensor: per-cgroup scheduling statistics. Plain C types. */
#ifndef KEEL_SCHED_SHARED_H
#define KEEL_SCHED_SHARED_H

#ifdef __cplusplus
#include <cstdint>
typedef uint32_t keel_u32;
typedef uint64_t keel_u64;
#else
typedef __u32 keel_u32;
typedef __u64 keel_u64;
#endif

/* Run-queue latency histogram, log-linear in microseconds: values below 8 us have a bucket each;
 * above, every power of two is split into 8 sub-buckets (each at most 12.5% wide), up to 2^26 us
 * (~67 s); larger values land in the last bucket. */
#define KEEL_HIST_SUB_BITS 3
#define KEEL_HIST_SUB (1 << KEEL_HIST_SUB_BITS)
#define KEEL_HIST_MAX_POW 26
#define KEEL_HIST_BUCKETS (KEEL_HIST_SUB + (KEEL_HIST_MAX_POW - KEEL_HIST_SUB_BITS) * KEEL_HIST_SUB)
/* Storage rounded up to a power of two so the BPF side can bound the index with a mask. */
#define KEEL_HIST_SLOTS 256

/* CPUs the .rodata topology tables cover. */
#define KEEL_MAX_CPUS 1024

/* Perf counters read at every switch (cache misses, cache references, instructions, cycles). The
 * perf event array holds one event per (CPU, counter) at index cpu * KEEL_MAX_COUNTERS + counter. */
#define KEEL_MAX_COUNTERS 4

/* Which hierarchy the cgroup key comes from. */
enum keel_v1_controller { KEEL_V1_NONE = 0, KEEL_V1_CPU = 1, KEEL_V1_CPUSET = 2, KEEL_V1_CPUACCT = 3 };

struct keel_cg_key {
  keel_u32 hierarchy; /* /proc/cgroups hierarchy id; 0 = unified (v2) */
  keel_u32 pad;
  keel_u64 cgroup_id; /* kernfs id = inode of the cgroup directory */
};

struct keel_cg_stats {
  keel_u64 rq_hist[KEEL_HIST_SLOTS]; /* [KEEL_HIST_BUCKETS..] stay 0; their sum is the number of waits */
  keel_u64 rq_sum_ns;
  keel_u64 migrations; /* all */
  keel_u64 cross_llc;
  keel_u64 cross_numa;
  keel_u64 counters[KEEL_MAX_COUNTERS]; /* perf counter deltas charged to the task switched out */
};

/* A hot slot: the run-queue counts of one of the cgroups user space gives a slot (the busiest, critical
 * ones first). A task caches its cgroup's slot in its task storage, so its waits are counted through an
 * array access instead of a hash lookup (~65 ns apart on a VM: bench/README.md). The counts start as
 * keel_cg_stats does, so the programs update either the same way; a cgroup's run-queue counts are its
 * cg_stats entry's plus its slot's. */
struct keel_cg_hot {
  keel_u64 rq_hist[KEEL_HIST_SLOTS];
  keel_u64 rq_sum_ns;
  struct keel_cg_key key; /* whose slot it is; cgroup_id 0: free */
};

/* The SLO watch: a critical cgroup's run-queue SLO. Waits longer than slo_ns are counted per window of
 * window_ns, each once and once more for every long_us it lasted (a victim starved to waits of many
 * milliseconds wakes too seldom to reach `threshold` one by one); the wait that makes the count reach
 * `threshold` sends one keel_slo_event through the ring buffer with a forced wakeup (once per window),
 * so keel ticks at once instead of at the period's end. */
#define KEEL_SLO_WATCH_MAX 256
struct keel_slo_watch {
  keel_u64 slo_ns;
  keel_u64 window_ns;
  keel_u32 threshold;
  keel_u32 long_us;      /* 0: every wait counts once */
  keel_u64 window_start; /* kernel side: the window's start (bpf_ktime_get_ns) */
  keel_u64 over;         /* kernel side: waits over slo_ns in it, long ones counted more */
};

struct keel_slo_event {
  struct keel_cg_key key;
  keel_u64 at_ns;   /* bpf_ktime_get_ns (CLOCK_MONOTONIC) of the crossing */
  keel_u64 wait_ns; /* the wait that crossed */
  keel_u64 over;    /* waits over the SLO in the window so far */
};

/* Slots of the global per-CPU `errors` array: what could not be recorded, never silently. */
enum keel_sched_error {
  KEEL_ERR_CG_MAP_FULL = 0, /* a cgroup had no entry and the stats map was full */
  KEEL_ERR_STAMP_FULL = 1,  /* a wakeup stamp could not be stored */
  KEEL_ERR_NSLOTS = 2,
};

#endif
