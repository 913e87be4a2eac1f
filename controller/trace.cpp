#include "controller/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <variant>
#include <vector>

#include "host/json.h"

namespace keel::ctl {

namespace {

// A small JSON reader for the trace's own format (objects, arrays, strings, numbers, booleans, null).
struct Value;
using Object = std::map<std::string, Value>;
using Array = std::vector<Value>;
struct Value {
  std::variant<std::nullptr_t, bool, double, std::string, std::shared_ptr<Array>, std::shared_ptr<Object>> v;
};

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  Result<Value> document() {
    auto v = value();
    if (!v) return v;
    ws();
    if (i_ != s_.size()) return bad("trailing characters");
    return v;
  }

 private:
  std::unexpected<Error> bad(const std::string& what) const {
    return fail("trace line: " + what + " at character " + std::to_string(i_));
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n')) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Result<Value> value() {
    if (++depth_ > 32) return bad("nested too deep");
    ws();
    if (i_ >= s_.size()) return bad("unexpected end");
    char c = s_[i_];
    Result<Value> out = bad("unexpected character");
    if (c == '{')
      out = object();
    else if (c == '[')
      out = array();
    else if (c == '"') {
      auto str = string();
      out = str ? Result<Value>(Value{*str}) : std::unexpected(str.error());
    } else if (s_.substr(i_, 4) == "true") {
      i_ += 4;
      out = Value{true};
    } else if (s_.substr(i_, 5) == "false") {
      i_ += 5;
      out = Value{false};
    } else if (s_.substr(i_, 4) == "null") {
      i_ += 4;
      out = Value{nullptr};
    } else {
      out = number();
    }
    --depth_;
    return out;
  }
  Result<Value> number() {
    std::string tok;
    while (i_ < s_.size() && std::string_view("+-0123456789.eE").find(s_[i_]) != std::string_view::npos)
      tok += s_[i_++];
    if (tok.empty()) return bad("expected a value");
    char* end = nullptr;
    double d = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size()) return bad("bad number " + tok);
    return Value{d};
  }
  Result<std::string> string() {
    ++i_;  // opening quote
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      char e = s_[i_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (i_ + 4 > s_.size()) return bad("short \\u escape");
          unsigned cp =
              static_cast<unsigned>(std::strtoul(std::string(s_.substr(i_, 4)).c_str(), nullptr, 16));
          i_ += 4;
          if (cp < 0x80)
            out += static_cast<char>(cp);
          else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default:
          out += e;  // \" \\ \/
      }
    }
    if (i_ >= s_.size()) return bad("unterminated string");
    ++i_;
    return out;
  }
  Result<Value> array() {
    ++i_;
    auto a = std::make_shared<Array>();
    if (eat(']')) return Value{a};
    for (;;) {
      auto v = value();
      if (!v) return v;
      a->push_back(std::move(*v));
      if (eat(']')) return Value{a};
      if (!eat(',')) return bad("expected , or ]");
    }
  }
  Result<Value> object() {
    ++i_;
    auto o = std::make_shared<Object>();
    if (eat('}')) return Value{o};
    for (;;) {
      ws();
      if (i_ >= s_.size() || s_[i_] != '"') return bad("expected a key");
      auto k = string();
      if (!k) return std::unexpected(k.error());
      if (!eat(':')) return bad("expected :");
      auto v = value();
      if (!v) return v;
      (*o)[*k] = std::move(*v);
      if (eat('}')) return Value{o};
      if (!eat(',')) return bad("expected , or }");
    }
  }
  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
};

const Value* get(const Object& o, const char* k) {
  auto it = o.find(k);
  return it == o.end() ? nullptr : &it->second;
}

template <class T>
const T* as(const Value* v) {
  return v ? std::get_if<T>(&v->v) : nullptr;
}

}  // namespace

std::string to_json_line(const Snapshot& s) {
  JsonWriter j;
  j.begin_object().field("tick", static_cast<unsigned long long>(s.tick)).key("period_s").precise(s.period_s);
  j.key("workloads").begin_array();
  for (const auto& w : s.workloads) {
    j.begin_object()
        .field("instance", w.instance)
        .field("workload", w.workload)
        .field("critical", w.critical);
    if (w.fresh) j.field("fresh", true);
    j.key("cgroups").begin_array();
    for (const auto& c : w.cgroups) j.value(c);
    j.end_array();
    j.field("rq_waits", static_cast<unsigned long long>(w.rq_waits));
    j.key("rq_p50_us").precise(w.rq_p50_us).key("rq_p99_us").precise(w.rq_p99_us);
    j.key("rq_wait_s_per_s").precise(w.rq_wait_s_per_s);
    j.key("migrations_per_s").precise(w.migrations_per_s).key("cross_llc_per_s").precise(w.cross_llc_per_s);
    j.key("cross_numa_per_s").precise(w.cross_numa_per_s);
    auto opt = [&](const char* k, const std::optional<double>& v) {
      j.key(k);
      v ? j.precise(*v) : j.null();
    };
    opt("cache_misses_per_s", w.cache_misses_per_s);
    opt("mpki", w.mpki);
    opt("cpu_usage", w.cpu_usage);
    opt("throttled_per_s", w.throttled_per_s);
    j.field("cpus", w.cpus.to_list());
    j.key("shares");
    w.shares ? j.value(static_cast<unsigned long long>(*w.shares)) : j.null();
    j.end_object();
  }
  j.end_array().end_object();
  return j.str();
}

Result<Snapshot> parse_json_line(std::string_view line) {
  auto doc = Reader(line).document();
  if (!doc) return std::unexpected(doc.error());
  auto top = as<std::shared_ptr<Object>>(&*doc);
  if (!top) return fail("trace line: not an object");
  const Object& o = **top;
  Snapshot s;
  auto tick = as<double>(get(o, "tick"));
  auto period = as<double>(get(o, "period_s"));
  auto wls = as<std::shared_ptr<Array>>(get(o, "workloads"));
  if (!tick || *tick < 0 || !period || !wls) return fail("trace line: needs tick, period_s and workloads");
  s.tick = static_cast<uint64_t>(*tick);
  s.period_s = *period;
  for (const Value& v : **wls) {
    auto wo = as<std::shared_ptr<Object>>(&v);
    if (!wo) return fail("trace line: a workload is not an object");
    const Object& w = **wo;
    WorkloadSignals ws;
    auto str = [&](const char* k, std::string& out) {
      if (auto p = as<std::string>(get(w, k)))
        out = *p;
      else
        return false;
      return true;
    };
    auto num = [&](const char* k, double& out) {
      if (auto p = as<double>(get(w, k)))
        out = *p;
      else
        return false;
      return true;
    };
    auto opt = [&](const char* k, std::optional<double>& out) {
      if (auto p = as<double>(get(w, k))) out = *p;
    };
    double waits = 0;
    std::string cpus;
    auto crit = as<bool>(get(w, "critical"));
    if (!str("instance", ws.instance) || !str("workload", ws.workload) || !crit || !num("rq_waits", waits) ||
        !num("rq_p50_us", ws.rq_p50_us) || !num("rq_p99_us", ws.rq_p99_us) || !str("cpus", cpus))
      return fail(
          "trace line: a workload lacks instance, workload, critical, rq_waits, rq_p50_us, rq_p99_us or "
          "cpus");
    ws.critical = *crit;
    ws.rq_waits = static_cast<uint64_t>(waits);
    num("rq_wait_s_per_s", ws.rq_wait_s_per_s);  // absent in older traces: 0
    num("migrations_per_s", ws.migrations_per_s);
    num("cross_llc_per_s", ws.cross_llc_per_s);
    num("cross_numa_per_s", ws.cross_numa_per_s);
    opt("cache_misses_per_s", ws.cache_misses_per_s);
    opt("mpki", ws.mpki);
    opt("cpu_usage", ws.cpu_usage);
    opt("throttled_per_s", ws.throttled_per_s);
    if (auto sh = as<double>(get(w, "shares"))) ws.shares = static_cast<uint64_t>(*sh);
    if (auto f = as<bool>(get(w, "fresh"))) ws.fresh = *f;  // absent in older traces, and when not
    if (auto cg = as<std::shared_ptr<Array>>(get(w, "cgroups")))
      for (const Value& c : **cg)
        if (auto p = as<std::string>(&c)) ws.cgroups.push_back(*p);
    auto set = CpuSet::parse_list(cpus);
    if (!set) return fail("trace line: workload " + ws.instance + ": bad cpus \"" + cpus + "\"");
    ws.cpus = *set;
    s.workloads.push_back(std::move(ws));
  }
  return s;
}

std::string format_actions(const Plan& p, std::string_view mode) {
  std::string out;
  const std::string head = "tick " + std::to_string(p.tick) + (mode.empty() ? "" : " " + std::string(mode));
  const char* would = mode == "observe" ? "would " : "";
  for (const auto& a : p.actions) {
    const char* kind = a.kind == Action::Kind::act         ? "act"
                       : a.kind == Action::Kind::give_back ? "give-back"
                                                           : "revert";
    out += head + " " + would + kind + " " + (a.instance.empty() ? "(host)" : a.instance) + " " +
           to_string(a.knob) + " " + (a.from.empty() ? "(as found)" : a.from) + " -> " +
           (a.to.empty() ? "(as found)" : a.to) + ": " + a.reason + "\n";
  }
  if (!mode.empty()) {
    std::vector<std::string> named;
    for (const auto& i : p.interference) {
      if (std::find(named.begin(), named.end(), i.victim) != named.end()) continue;
      named.push_back(i.victim);
      char score[32];
      std::snprintf(score, sizeof score, "%.2f", i.score);
      out += head + " interference " + i.victim + " antagonist " + i.antagonist + " (" + score +
             " CPUs busy or queued on its CPUs)\n";
    }
  }
  for (const auto& [inst, v] : p.workloads)
    if (!v.blocked.empty() && v.violated) out += head + " blocked " + inst + ": " + v.blocked + "\n";
  return out;
}

}  // namespace keel::ctl
