#include "host/systemd.h"

#include <systemd/sd-bus.h>
#include <time.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "host/cpuset.h"
#include "host/fileio.h"
#include "host/knob_values.h"

namespace keel {

namespace {

constexpr std::array<std::string_view, 2> kNames = {"CPUWeight", "StartupAllowedCPUs"};
// One deadline over all of it: connecting, authenticating (sd-bus would otherwise wait for that up to
// its own 90 s) and the call. systemd answers in ms; a busy one (a reload) in seconds.
constexpr uint64_t kDeadlineUs = 5'000'000;

struct BusDeleter {
  void operator()(sd_bus* b) const {
    sd_bus_close_unref(b);
  }  // no flush: it waits for authentication unbounded
};
struct MessageDeleter {
  void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using Bus = std::unique_ptr<sd_bus, BusDeleter>;
using Message = std::unique_ptr<sd_bus_message, MessageDeleter>;

uint64_t now_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

// sd-bus's address syntax: a path's bytes other than [A-Za-z0-9_/.-] percent-encoded.
std::string bus_address(const std::filesystem::path& socket) {
  return "unix:path=" + percent_encode(socket.string(), "_/.-");
}

// The connection, kept between calls (one per socket: tests point SysRoots at others), and the lock
// that makes one call at a time use it.
struct Connection {
  std::mutex lock;
  std::string address;
  Bus bus;
  // After a question ran out of time, the next ones within kQuietUs fail at once: a wedged manager costs
  // a tick one deadline, not one per unit asked (keel's watchdog is 30 s).
  uint64_t quiet_until = 0;
  std::string quiet_why;
};
constexpr uint64_t kQuietUs = 30'000'000;
Connection& connection() {
  static Connection c;
  return c;
}

// The kept connection when it is still open, else a new one, authenticated before `deadline`.
Result<sd_bus*> connect(Connection& c, const SysRoots& roots, uint64_t deadline) {
  const std::string where = roots.systemd_bus.string(), address = bus_address(roots.systemd_bus);
  if (c.bus && (c.address != address || sd_bus_is_open(c.bus.get()) <= 0)) c.bus.reset();
  if (c.bus) return c.bus.get();
  if (c.address == address && now_us() < c.quiet_until)
    return fail(
        c.quiet_why + "; not asked again for " + std::to_string(kQuietUs / 1'000'000) + " s after that",
        where, ETIMEDOUT);
  sd_bus* raw = nullptr;
  int r = sd_bus_new(&raw);
  if (r < 0) return fail("cannot make a D-Bus connection", where, -r);
  Bus bus(raw);
  if ((r = sd_bus_set_address(bus.get(), address.c_str())) < 0 || (r = sd_bus_start(bus.get())) < 0)
    return fail("cannot connect to systemd's manager", where, -r);
  while ((r = sd_bus_is_ready(bus.get())) == 0) {
    if ((r = sd_bus_process(bus.get(), nullptr)) < 0) break;
    if (r > 0) continue;
    const uint64_t now = now_us();
    if (now >= deadline) {
      c.address = address;
      c.quiet_until = now + kQuietUs;
      c.quiet_why = "systemd's manager did not complete the connection (authentication) within " +
                    std::to_string(kDeadlineUs / 1'000'000) + " s";
      return fail(c.quiet_why, where, ETIMEDOUT);
    }
    if ((r = sd_bus_wait(bus.get(), deadline - now)) < 0) break;
  }
  if (r < 0) return fail("cannot connect to systemd's manager", where, -r);
  c.address = address;
  c.bus = std::move(bus);
  return c.bus.get();
}

// After a failed call: a connection that timed out or broke is not kept (the next call connects again).
void forget_if_broken(Connection& c, int r) {
  if (r == -ETIMEDOUT || r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE || r == -ECONNREFUSED || !c.bus ||
      sd_bus_is_open(c.bus.get()) <= 0)
    c.bus.reset();
}

// An sd-bus failure as keel's error, with systemd's own reason where it gave one (then errno only for a
// unit it does not know: ENOENT); `e` is freed.
std::unexpected<Error> bus_fail(std::string what, const SysRoots& roots, sd_bus_error& e, int r) {
  int err = -r;
  if (sd_bus_error_is_set(&e)) {
    what += ": " + std::string(e.message != nullptr ? e.message : e.name);
    err = sd_bus_error_has_name(&e, "org.freedesktop.systemd1.NoSuchUnit") ? ENOENT : 0;
  }
  sd_bus_error_free(&e);
  return fail(std::move(what), roots.systemd_bus.string(), err);
}

// The CPU list as systemd's D-Bus takes AllowedCPUs: a bit mask, CPU n at bit n % 8 of byte n / 8.
Result<std::vector<uint8_t>> cpu_bytes(std::string_view list) {
  std::vector<uint8_t> bytes;
  if (trim(list).empty()) return bytes;
  auto cpus = CpuSet::parse_list(list);
  if (!cpus) return std::unexpected(cpus.error());
  for (unsigned c : cpus->cpus()) {
    if (bytes.size() <= c / 8) bytes.resize(c / 8 + 1, 0);
    bytes[c / 8] |= static_cast<uint8_t>(1u << (c % 8));
  }
  return bytes;
}

Result<void> call_set_property(Connection& c, const SysRoots& roots, uint64_t deadline,
                               const std::string& what, const std::string& u, UnitProperty p,
                               const std::string& name, uint64_t weight, const std::vector<uint8_t>& cpus);

}  // namespace

std::string_view to_string(UnitProperty p) { return kNames[static_cast<size_t>(p)]; }

std::optional<UnitProperty> parse_unit_property(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<UnitProperty>(i);
  return std::nullopt;
}

std::string_view controller_of(UnitProperty p) { return p == UnitProperty::cpu_weight ? "cpu" : "cpuset"; }

bool valid_unit_name(std::string_view name) {
  if (name.size() > 255) return false;
  std::string_view stem;
  for (std::string_view suffix : {".service", ".scope", ".slice"})
    if (name.size() > suffix.size() && name.ends_with(suffix))
      stem = name.substr(0, name.size() - suffix.size());
  if (stem.empty()) return false;
  for (char c : stem)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
          c == '-' || c == '_' || c == '.' || c == '\\' || c == '@'))
      return false;
  return true;
}

Result<void> set_unit_property(const SysRoots& roots, std::string_view unit, UnitProperty p,
                               std::string_view value) {
  const std::string u(unit), name(to_string(p)),
      what = "SetUnitProperties " + u + " " + name + "=" + std::string(value) + " (runtime)";
  if (!valid_unit_name(unit)) return fail(what + ": not a unit name keel asks systemd about");
  // Checked before the bus is asked: a bad value is an error that changes nothing.
  uint64_t weight = UINT64_MAX;  // systemd's "not set"
  std::vector<uint8_t> cpus;
  if (p == UnitProperty::cpu_weight) {
    if (!trim(value).empty()) {
      auto w = parse_integer(trim(value));
      if (!w || *w < 1 || *w > 10000) return fail(what + ": a CPU weight is a number from 1 to 10000");
      weight = static_cast<uint64_t>(*w);
    }
  } else {
    auto b = cpu_bytes(value);
    if (!b) return fail(what + ": " + b.error().message());
    cpus = std::move(*b);
  }
  const uint64_t deadline = now_us() + kDeadlineUs;
  Connection& c = connection();
  std::lock_guard hold(c.lock);
  // A kept connection systemd has closed meanwhile (a daemon-reexec) fails at once: once more, anew.
  for (int attempt = 0;; ++attempt) {
    const bool kept = c.bus != nullptr;
    auto r = call_set_property(c, roots, deadline, what, u, p, name, weight, cpus);
    if (r || attempt > 0 || !kept || c.bus != nullptr) return r;
  }
}

namespace {

Result<void> call_set_property(Connection& c, const SysRoots& roots, uint64_t deadline,
                               const std::string& what, const std::string& u, UnitProperty p,
                               const std::string& name, uint64_t weight, const std::vector<uint8_t>& cpus) {
  auto bus = connect(c, roots, deadline);
  if (!bus) return std::unexpected(bus.error());
  sd_bus_message* raw = nullptr;
  int r = sd_bus_message_new_method_call(*bus, &raw, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                         "org.freedesktop.systemd1.Manager", "SetUnitProperties");
  if (r < 0) return fail(what + ": cannot build the call", roots.systemd_bus.string(), -r);
  Message call(raw);
  sd_bus_message* m = call.get();
  if ((r = sd_bus_message_append(m, "sb", u.c_str(), 1)) >= 0 &&
      (r = sd_bus_message_open_container(m, 'a', "(sv)")) >= 0 &&
      (r = sd_bus_message_open_container(m, 'r', "sv")) >= 0 &&
      (r = sd_bus_message_append(m, "s", name.c_str())) >= 0) {
    if (p == UnitProperty::cpu_weight) {
      r = sd_bus_message_append(m, "v", "t", weight);
    } else if ((r = sd_bus_message_open_container(m, 'v', "ay")) >= 0 &&
               (r = sd_bus_message_append_array(m, 'y', cpus.data(), cpus.size())) >= 0) {
      r = sd_bus_message_close_container(m);
    }
  }
  if (r >= 0 && (r = sd_bus_message_close_container(m)) >= 0) r = sd_bus_message_close_container(m);
  if (r < 0) return fail(what + ": cannot build the call", roots.systemd_bus.string(), -r);
  sd_bus_error e = SD_BUS_ERROR_NULL;
  sd_bus_message* reply = nullptr;
  const uint64_t now = now_us();
  r = now < deadline ? sd_bus_call(*bus, m, deadline - now, &e, &reply) : -ETIMEDOUT;
  sd_bus_message_unref(reply);
  if (r < 0) {
    forget_if_broken(c, r);
    if (r == -ETIMEDOUT && !sd_bus_error_is_set(&e)) {
      c.quiet_until = now_us() + kQuietUs;
      c.quiet_why =
          "systemd's manager did not answer within " + std::to_string(kDeadlineUs / 1'000'000) + " s";
      return fail(what + ": " + c.quiet_why, roots.systemd_bus.string(), ETIMEDOUT);
    }
    return bus_fail(what, roots, e, r);
  }
  return {};
}

}  // namespace

Result<std::string> systemd_version(const SysRoots& roots) {
  const uint64_t deadline = now_us() + kDeadlineUs;
  Connection& c = connection();
  std::lock_guard hold(c.lock);
  auto bus = connect(c, roots, deadline);
  if (!bus) return std::unexpected(bus.error());
  sd_bus_error e = SD_BUS_ERROR_NULL;
  char* version = nullptr;
  // sd_bus_get_property_string has no timeout of its own: the bus's method call timeout, what is left.
  const uint64_t now = now_us();
  sd_bus_set_method_call_timeout(*bus, now < deadline ? deadline - now : 1);
  int r = sd_bus_get_property_string(*bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", "Version", &e, &version);
  if (r < 0) {
    forget_if_broken(c, r);
    return bus_fail("systemd's Version", roots, e, r);
  }
  std::string v(version);
  std::free(version);
  return v;
}

}  // namespace keel
