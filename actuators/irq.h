// Interrupt placement: IRQ affinity (/proc/irq/<n>/smp_affinity_list) for IRQs chosen by device name
// from /proc/interrupts, and network receive/transmit steering (RPS/XPS masks). Every write goes
// through the KnobWriter: journaled first, nothing written in observe mode.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actuators/writer.h"
#include "host/cpuset.h"
#include "host/error.h"
#include "host/sys_roots.h"

namespace keel::act {

// Why IRQ affinity cannot be written here, or "": a sandbox that mounts /proc/irq read-only (systemd's
// ProtectKernelTunables=) makes every write fail with EROFS.
std::string irq_affinity_unwritable(const SysRoots& roots);

// One line of /proc/interrupts.
struct IrqLine {
  std::string id;                    // "24", or "NMI", "LOC", ... for the architecture's counters
  int irq = -1;                      // the IRQ number; -1 for the named lines
  std::vector<uint64_t> counts;      // per column of Interrupts::cpus (ERR/MIS have a single total)
  std::string chip;                  // "PCI-MSI", "IR-PCI-MSI", "ITS-MSI", "IO-APIC" (numbered lines)
  std::string hwirq;                 // "49153-edge", "524289 Edge" (numbered lines)
  std::vector<std::string> devices;  // the handlers' names, "virtio0-input.0"; none for NMI/LOC/...
  std::string description;           // named lines: "Non-maskable interrupts"
};

struct Interrupts {
  std::vector<unsigned> cpus;  // the header's CPU numbers: the online CPUs, one count column each
  std::vector<IrqLine> lines;
};

Result<Interrupts> parse_interrupts(std::string_view text);
Result<Interrupts> read_interrupts(const SysRoots& roots);  // <proc>/interrupts
// An IRQ's affinity: <proc>/irq/<n>/smp_affinity_list, a CPU list.
KnobPath irq_affinity_knob(unsigned irq);

// Shell glob (*, ?, [...]) on a whole device name: "virtio*-input.*", "mlx5_comp*".
bool glob_match(std::string_view pattern, std::string_view name);
// The numbered IRQs with a device name matching one of `patterns`, ascending.
std::vector<unsigned> match_irqs(const Interrupts& table, const std::vector<std::string>& patterns);

struct IrqMove {
  unsigned irq = 0;
  CpuSet from, to;
};

struct IrqReport {
  std::vector<IrqMove> moved;  // written (observe mode: would be)
  size_t unchanged = 0;        // already where wanted
  std::string warning;         // non-empty when irqbalance runs: it would move them back
};

// Takes `avoid` (the critical CPUs) out of each IRQ's affinity. Every IRQ is checked before any write:
// when one would be left with no CPU of `host_cpus`, or `avoid` names a CPU not in `host_cpus`, it
// is an error and nothing is written.
Result<IrqReport> move_irqs_off(KnobWriter& w, const std::vector<unsigned>& irqs, const CpuSet& avoid,
                                const CpuSet& host_cpus);
// Sets each IRQ's affinity to `cpus` (non-empty, within `host_cpus`).
Result<IrqReport> move_irqs_onto(KnobWriter& w, const std::vector<unsigned>& irqs, const CpuSet& cpus,
                                 const CpuSet& host_cpus);

// Receive packet steering (rx-<q>/rps_cpus) and transmit packet steering (tx-<q>/xps_cpus).
enum class QueueKind { rx, tx };

// The queue numbers of <sys>/class/net/<dev>/queues, ascending.
Result<std::vector<unsigned>> net_queues(const SysRoots& roots, std::string_view dev, QueueKind kind);
// Sets one queue's steering mask to `cpus` (within `host_cpus`; empty turns RPS/XPS off for the
// queue). Returns true when it changed (observe mode: would change).
Result<bool> set_queue_cpus(KnobWriter& w, std::string_view dev, QueueKind kind, unsigned queue,
                            const CpuSet& cpus, const CpuSet& host_cpus);

// Pids whose <proc>/<pid>/comm is irqbalance, which rewrites IRQ affinities on its own schedule.
std::vector<int> irqbalance_pids(const SysRoots& roots);

}  // namespace keel::act
