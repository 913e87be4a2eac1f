// systemd's manager, asked the way systemctl asks it as root: over its private socket
// (SysRoots::systemd_bus, /run/systemd/private), with libsystemd's sd-bus. keel asks it for one thing:
// a unit's runtime property (SetUnitProperties with runtime=true: kept in /run/systemd/system.control
// until reboot, through daemon-reload), so that systemd itself enables a cgroup controller for the
// unit, as it keeps doing whenever it realises the unit again; keel never writes a cgroup.subtree_control
// behind systemd. One connection is kept between questions; each question has 5 s over connecting,
// authenticating and the call, and after one ran out of time the next within 30 s fail at once.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "host/error.h"
#include "host/sys_roots.h"

namespace keel {

// The properties keel sets, each because it makes systemd enable a controller for the unit and
// changes nothing else there: CPUWeight (the cpu controller; keel sets the kernel's default weight, 100)
// and StartupAllowedCPUs (the cpuset controller; applied only while the manager starts up, so once the
// host is up the unit's cpuset.cpus stays not set: no CPU list written, no task's affinity reset).
enum class UnitProperty { cpu_weight, startup_allowed_cpus };
std::string_view to_string(UnitProperty p);  // its D-Bus name: "CPUWeight", "StartupAllowedCPUs"
std::optional<UnitProperty> parse_unit_property(std::string_view name);
// The controller the property makes systemd enable: "cpu", "cpuset".
std::string_view controller_of(UnitProperty p);

// Whether `name` is a unit name as systemd makes them (what a journal may name): at most 255 bytes of
// letters, digits and ":-_.\@", a prefix and one of the suffixes keel's cgroups have (.service, .scope,
// .slice).
bool valid_unit_name(std::string_view name);

// Sets `p` of `unit` at runtime to `value` as `systemctl set-property --runtime` reads it: CPUWeight a
// weight (1-10000) or "" (not set: the unit's own setting, or none, applies again); StartupAllowedCPUs
// a CPU list ("0-3,8") or "" (not set). An error names the unit, the property and systemd's reason; a
// unit systemd does not know fails with ENOENT.
Result<void> set_unit_property(const SysRoots& roots, std::string_view unit, UnitProperty p,
                               std::string_view value);

// The systemd manager answering on the socket, by its version ("252"); an error says why none does.
Result<std::string> systemd_version(const SysRoots& roots);

}  // namespace keel
