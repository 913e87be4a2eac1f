// SPDX-License-Identifier: GPL-2.0
/*
 * Feature probe and smallest real program keel loads: counts sched_switch events per CPU.
 * Two variants of the same program, tp_btf (BTF-typed, cheaper) and raw_tp (older kernels);
 * the loader turns off autoload of the one it does not use.
 */
// The kernel headers must come in this order.
// clang-format off
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

#include "probe_shared.h"

char LICENSE[] SEC("license") = "GPL";

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, KEEL_PROBE_NSLOTS);
  __type(key, __u32);
  __type(value, __u64);
} counts SEC(".maps");

static __always_inline int count_switch(void) {
  __u32 slot = KEEL_PROBE_SWITCHES;
  __u64* v = bpf_map_lookup_elem(&counts, &slot);
  if (v) *v += 1; /* per-CPU slot: no atomics needed */
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(keel_probe_switch_btf) { return count_switch(); }

SEC("raw_tp/sched_switch")
int BPF_PROG(keel_probe_switch_raw) { return count_switch(); }
