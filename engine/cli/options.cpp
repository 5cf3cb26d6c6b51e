#include "engine/cli/options.hpp"

#include <algorithm>
#include <cctype>

#include "engine/script/lua_state.hpp"

namespace tandem::cli {

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  // As the experiment keys' suggestions allow (scripts/tandem/experiment.lua), but two
  // edits at least: a swapped pair of letters ('rnu') is two.
  const int limit = std::max(2, std::min(3, static_cast<int>(word.size()) / 3));
  LuaState L;
  std::string best;
  int best_d = limit + 1;
  for (const std::string& c : candidates) {
    push_module_function(L, "tandem.text", "distance");
    lua_pushlstring(L, word.data(), word.size());
    lua_pushlstring(L, c.data(), c.size());
    protected_call(L, 2, 1, "measuring the distance between two words");
    const int d = static_cast<int>(lua_tonumber(L, -1));
    lua_pop(L, 1);
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

namespace {

const Option* find_option(const Command& cmd, const std::string& name) {
  for (const Option& o : cmd.options)
    if (o.name == name) return &o;
  return nullptr;
}

std::string unknown_option(const Command& cmd, const std::string& name) {
  std::vector<std::string> names = {"--help"};
  for (const Option& o : cmd.options) names.push_back(o.name);
  const std::string near = nearest(name, names);
  return "unknown option '" + name + "' for " + cmd.name + (near.empty() ? "" : " (did you mean '" + near + "'?)");
}

}  // namespace

std::string parse_command_line(const Command& cmd, const std::vector<std::string>& args, CommandLine* line) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      line->help = true;
    } else if (a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(0, eq);
      const Option* o = find_option(cmd, name);
      if (!o) return unknown_option(cmd, name);
      if (o->value.empty()) {
        if (eq != std::string::npos) return name + " takes no value (give it alone)";
        line->options[name] = "";
      } else if (eq != std::string::npos) {
        line->options[name] = a.substr(eq + 1);
      } else {
        if (i + 1 >= args.size()) return name + " needs a value: " + name + " " + o->value;
        line->options[name] = args[++i];
      }
    } else if (a.size() > 1 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1]))) {
      return "unknown option '" + a + "' for " + cmd.name + " (options are spelled --name)";
    } else if (cmd.overrides && a.find('=') != std::string::npos) {
      line->overrides.push_back(a);
    } else if (cmd.operand.empty()) {
      return cmd.name + " takes no argument ('" + a + "')";
    } else if (line->operand.empty()) {
      line->operand = a;
    } else {
      return "more than one " + cmd.operand + " given ('" + line->operand + "' and '" + a + "')";
    }
  }
  return "";
}

}  // namespace tandem::cli
