// Recorded ticks: one Snapshot per line as JSON (what `keel run --record` writes and `keel replay`
// reads), numbers written so they read back exactly, so a replay decides what the live run decided.
#pragma once

#include <string>
#include <string_view>

#include "controller/controller.h"
#include "controller/snapshot.h"
#include "host/error.h"

namespace keel::ctl {

std::string to_json_line(const Snapshot& s);
// Error names what is wrong (the field, or where the JSON breaks).
Result<Snapshot> parse_json_line(std::string_view line);

// A plan's actions as decision-log lines: "tick 12 act redis shares 1024 -> 2048: <reason>". With a
// mode (keel run's log) each line says it after the tick, observe's actions are "would act", and each
// violated workload's top antagonist gets an "interference" line:
// "tick 12 observe would act redis shares 1024 -> 2048: <reason>".
std::string format_actions(const Plan& p, std::string_view mode = {});

}  // namespace keel::ctl
