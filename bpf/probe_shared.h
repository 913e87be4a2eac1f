/* Structs and constants shared by probe.bpf.c and the C++ loader (plain C types only). */
#ifndef KEEL_PROBE_SHARED_H
#define KEEL_PROBE_SHARED_H

/* Slots of the per-CPU `counts` array. */
enum keel_probe_slot {
  KEEL_PROBE_SWITCHES = 0, /* sched_switch events seen */
  KEEL_PROBE_NSLOTS = 1,
};

#endif
