// SPDX-License-Identifier: GPL-2.0
/*
 * The cost floor of keel's sensing (bench/overhead.sh): one empty program for each of bpf/sched.bpf.c's,
 * of the same type on the same tracepoint, named floor_<what keel calls it without "keel_">. Attached
 * as keel attaches its own, they cost what the hooks alone cost: the tracepoint's call, the trampoline
 * or raw_tp dispatch and the program's entry and exit. What keel costs above them is its own work.
 */
// The kernel headers must come in this order.
// clang-format off
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

char LICENSE[] SEC("license") = "GPL";

SEC("tp_btf/sched_wakeup")
int BPF_PROG(floor_wakeup_btf) { return 0; }

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(floor_wakeup_new_btf) { return 0; }

SEC("tp_btf/sched_switch")
int BPF_PROG(floor_switch_btf) { return 0; }

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(floor_migrate_btf) { return 0; }

SEC("raw_tp/sched_wakeup")
int BPF_PROG(floor_wakeup_raw) { return 0; }

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(floor_wakeup_new_raw) { return 0; }

SEC("raw_tp/sched_switch")
int BPF_PROG(floor_switch_raw) { return 0; }

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(floor_migrate_raw) { return 0; }
