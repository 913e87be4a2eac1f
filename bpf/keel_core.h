/* The kernel types keel's BPF programs read, declared by hand with CO-RE relocations
 * (preserve_access_index): libbpf matches them to the running kernel's BTF by name at load time, so
 * the objects build without the build machine's BTF and for any architecture. Only the fields keel
 * reads are listed. */
#ifndef KEEL_CORE_H
#define KEEL_CORE_H

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct kernfs_node {
  __u64 id; /* 5.5+: the inode number user space sees */
};

struct cgroup {
  struct kernfs_node* kn;
};

struct cgroup_subsys_state {
  struct cgroup* cgroup;
};

struct css_set {
  struct cgroup_subsys_state* subsys[16];
  struct cgroup* dfl_cgrp;
};

/* Read by bench/pieces only (bpf/pieces.bpf.c): a CPU's run queue clock, reached through a task's CFS
 * run queue (CONFIG_FAIR_GROUP_SCHED), and the kernel's record of a task's waits (CONFIG_SCHED_INFO). */
struct rq {
  unsigned long long clock;
};

struct cfs_rq {
  struct rq* rq;
};

struct sched_entity {
  struct cfs_rq* cfs_rq;
};

struct sched_info {
  unsigned long long run_delay;   /* total time waited on a run queue, summed at each arrival */
  unsigned long long last_queued; /* rq clock when queued; 0 while not waiting */
};

struct thread_info {
  unsigned int cpu; /* 5.16+ (and before 5.3) with CONFIG_THREAD_INFO_IN_TASK */
};

struct task_struct {
  struct thread_info thread_info;
  int pid;
  int tgid;
  unsigned int __state;
  struct sched_entity se;
  struct sched_info sched_info;
  struct css_set* cgroups;
};

/* 5.3 - 5.15: the CPU lived in task_struct itself. */
struct task_struct___cpu {
  unsigned int cpu;
};

/* Before 5.14 the state field was `long state`. */
struct task_struct___pre514 {
  long state;
};

#pragma clang attribute pop

enum cgroup_subsys_id {
  cpuset_cgrp_id = 0,
  cpu_cgrp_id = 1,
  cpuacct_cgrp_id = 2,
};

#endif
