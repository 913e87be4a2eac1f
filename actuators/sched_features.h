// Scheduler features in debugfs (openEuler's steal_task is the feature STEAL). The features file
// lists every feature on one line, NO_-prefixed when off; writing one token toggles that feature
// only. Restore writes the original token back (a sched_feature journal entry).
#pragma once

#include <string>
#include <string_view>

#include "actuators/knob.h"
#include "actuators/writer.h"
#include "host/error.h"
#include "host/sys_roots.h"

namespace keel::act {

// An idle CPU steals a runnable task from an overloaded CPU of its LLC (CONFIG_SCHED_STEAL).
inline constexpr std::string_view kSteal = "STEAL";

// `unsupported` is a state, not an error: mainline kernels have no STEAL, and debugfs may be unmounted.
enum class FeatureState { unsupported, off, on };

struct FeatureProbe {
  FeatureState state = FeatureState::unsupported;
  KnobPath file;    // debugfs:sched/features (5.13+) or debugfs:sched_features (4.19, 5.10); empty when none
  std::string why;  // when unsupported: debugfs not mounted, no features file, or the feature not listed
};

// Finds the features file under roots.debugfs and reads `name`'s state. When both files exist (no
// kernel has both) sched/features wins: it is where every kernel since 5.13 keeps it. An error only
// when the file exists but cannot be read (debugfs under lockdown), or `name` is not a feature name.
Result<FeatureProbe> probe_sched_feature(const SysRoots& roots, std::string_view name);

enum class FeatureChange { unsupported, unchanged, changed };  // changed: would change, in observe mode

// Turns `name` on (writes NAME) or off (NO_NAME) through the writer, journaling the current token
// first. A feature already in the wanted state is not written; an unsupported one is reported as
// such and nothing is written (probe_sched_feature says why).
Result<FeatureChange> set_sched_feature(KnobWriter& w, std::string_view name, bool on);

}  // namespace keel::act
