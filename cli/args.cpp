#include "cli/args.h"

namespace keel::cli {

Result<Args> parse_args(const std::vector<std::string>& argv, const FlagSpec& spec) {
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (s == "--") {
      a.positional.insert(a.positional.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
      break;
    }
    if (!s.starts_with("--") || s.size() == 2) {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      inline_value = true;
    }
    if (spec.switches.contains(name)) {
      if (inline_value) return fail("option --" + name + " takes no value");
      a.switches.insert(name);
    } else if (spec.with_value.contains(name)) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) return fail("option --" + name + " needs a value");
        value = argv[++i];
      }
      a.values[name] = value;
    } else {
      return fail("unknown option --" + name);
    }
  }
  return a;
}

}  // namespace keel::cli
