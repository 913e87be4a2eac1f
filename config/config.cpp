#include "config/config.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <tuple>

#include "config/internal.h"
#include "host/fileio.h"

namespace keel::config {

namespace {

struct Unit {
  std::string_view name;
  long long ns;
};
// Largest first: format_duration picks the first unit that divides exactly.
constexpr std::array<Unit, 6> kUnits = {{{"h", 3'600'000'000'000},
                                         {"m", 60'000'000'000},
                                         {"s", 1'000'000'000},
                                         {"ms", 1'000'000},
                                         {"us", 1'000},
                                         {"ns", 1}}};
constexpr std::string_view kUnitList = "units: ns, us, ms, s, m, h";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "Error while parsing key-value pair: expected value" -> "syntax error while parsing key-value pair: ..."
std::string syntax_message(std::string_view description) {
  constexpr std::string_view kPrefix = "Error while parsing ";
  std::string message = description.starts_with(kPrefix)
                            ? "syntax error while parsing " + std::string(description.substr(kPrefix.size()))
                            : "syntax error: " + std::string(description);
  // TOML 1.0 inline tables are one line; the natural way to write long bounds breaks that rule.
  if (description.find("inline table") != std::string_view::npos && description.ends_with("saw '\\n'"))
    message +=
        " (in TOML an inline table { ... } must fit on one line; "
        "use a table section such as [workload.bounds] instead)";
  return message;
}

Pos pos_of(const toml::source_position& p) {
  if (p.line == 0) return {1, 1};
  return {static_cast<int>(p.line), static_cast<int>(p.column)};
}

}  // namespace

std::string Diagnostic::str() const {
  return file + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.col) + ": " + message;
}

const char* to_string(Mode m) { return m == Mode::enforce ? "enforce" : "observe"; }

const char* to_string(Hierarchy h) {
  switch (h) {
    case Hierarchy::automatic:
      return "auto";
    case Hierarchy::unified:
      return "unified";
    case Hierarchy::cpu:
      return "cpu";
    case Hierarchy::cpuset:
      return "cpuset";
  }
  return "?";
}

const char* to_string(WorkloadClass c) { return c == WorkloadClass::critical ? "critical" : "best-effort"; }

const char* to_string(NumaPolicy n) { return n == NumaPolicy::single ? "single" : "any"; }

const char* to_string(PreemptMode p) {
  return p == PreemptMode::always ? "always" : p == PreemptMode::reactive ? "reactive" : "off";
}

Result<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  constexpr long long kMax = std::numeric_limits<long long>::max();
  std::string_view s = keel::trim(text);
  size_t i = 0;
  long long whole = 0;
  for (; i < s.size() && is_digit(s[i]); ++i) {
    int digit = s[i] - '0';
    if (whole > (kMax - digit) / 10) return fail("too large");
    whole = whole * 10 + digit;
  }
  if (i == 0) return fail("expected a number and a unit, e.g. \"200us\"");
  size_t fraction_begin = i;
  if (i < s.size() && s[i] == '.') {
    fraction_begin = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == fraction_begin) return fail("expected digits after '.'");
  }
  std::string_view fraction = s.substr(fraction_begin, i - fraction_begin);
  std::string_view unit_name = s.substr(i);
  if (unit_name.empty())
    return fail("no unit (write e.g. \"" + std::string(s) + "ms\"; " + std::string(kUnitList) + ")");
  auto unit = std::ranges::find(kUnits, unit_name, &Unit::name);
  if (unit == kUnits.end())
    return fail("unknown unit '" + std::string(unit_name) + "' (" + std::string(kUnitList) + ")");
  if (whole > kMax / unit->ns) return fail("too large");
  long long total = whole * unit->ns;
  // Each fraction digit is worth a tenth of the previous one; below 1ns it is dropped. The fraction
  // can carry a value that fits on its own over the top ("2562047.9h").
  for (long long scale = unit->ns / 10; char c : fraction) {
    long long digit = (c - '0') * scale;
    if (total > kMax - digit) return fail("too large");
    total += digit;
    scale /= 10;
  }
  if (total <= 0) return fail("must be greater than 0");
  return std::chrono::nanoseconds(total);
}

std::string format_duration(std::chrono::nanoseconds d) {
  long long ns = d.count();
  if (ns == 0) return "0s";
  for (const Unit& u : kUnits)
    if (ns % u.ns == 0) return std::to_string(ns / u.ns) + std::string(u.name);
  return std::to_string(ns) + "ns";
}

namespace detail {

Diagnostics Report::take_sorted() {
  std::ranges::stable_sort(diags_, [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.pos.line, a.pos.col) < std::tie(b.pos.line, b.pos.col);
  });
  return std::move(diags_);
}

bool valid_workload_name(std::string_view name) {
  return !name.empty() && std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' || c == '_' ||
           c == '-';
  });
}

std::string workload_label(std::string_view name, size_t index) {
  if (valid_workload_name(name)) return "workload '" + std::string(name) + "': ";
  return "workload #" + std::to_string(index + 1) + ": ";
}

}  // namespace detail

std::expected<Config, Diagnostics> load_string(std::string_view text, const std::string& file_name,
                                               const HostFacts& facts) {
  detail::Report report(file_name);
  if (auto bad = detail::prescan(text)) {  // toml++ never sees what it could not read safely
    report.error(bad->first, std::move(bad->second));
    return std::unexpected(report.take_sorted());
  }
  toml::table root;
  try {
    root = toml::parse(text, file_name);
  } catch (const toml::parse_error& e) {
    report.error(pos_of(e.source().begin), syntax_message(e.description()));
    return std::unexpected(report.take_sorted());
  }
  Config config = detail::read_config(root, report);
  config.file = file_name;
  detail::validate(config, facts, report);
  if (!report.empty()) return std::unexpected(report.take_sorted());
  config.warnings = report.take_warnings();
  return config;
}

std::expected<Config, Diagnostics> load_file(const std::filesystem::path& file, const HostFacts& facts) {
  auto text = keel::read_file(file, detail::kMaxConfigBytes);
  if (!text) {
    const Error& e = text.error();
    std::string why = e.err != 0 ? std::strerror(e.err) : e.what;
    return std::unexpected(Diagnostics{{file.string(), {1, 1}, "cannot read: " + why}});
  }
  return load_string(*text, file.string(), facts);
}

}  // namespace keel::config
