#include "engine/train/elastic_slots.hpp"

#include <cstdio>
#include <map>
#include <utility>

namespace tandem {

namespace {

using json = nlohmann::json;
using Slot = std::pair<std::string, int>;  // host, the slot's index on it

std::vector<Slot> slots_of(const std::vector<HostSlots>& hosts, int workers) {
  std::vector<Slot> slots;
  const std::vector<int> host_of = rank_hosts(hosts, workers);
  std::map<int, int> used;
  for (int h : host_of) slots.emplace_back(hosts[h].name, used[h]++);
  return slots;
}

// For each rank of the new job, the first job's rank in its slot, or -1.
std::vector<int> first_rank_of(const std::vector<Slot>& first, const std::vector<Slot>& now) {
  std::map<Slot, int> rank;
  for (int r = 0; r < static_cast<int>(first.size()); ++r) rank[first[r]] = r;
  std::vector<int> out;
  for (const Slot& s : now) out.push_back(rank.count(s) ? rank[s] : -1);
  return out;
}

const json* find(const json& j, std::initializer_list<const char*> path) {
  const json* at = &j;
  for (const char* key : path) {
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
  }
  return at->is_array() ? at : nullptr;
}

// A Lua string literal: quote and backslash escaped, control bytes as \ddd (JSON's
// \u00XX is no escape LuaJIT reads).
std::string lua_string(const std::string& text) {
  std::string s = "\"";
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') {
      s += '\\';
      s += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char code[5];
      std::snprintf(code, sizeof code, "\\%03d", c);  // always three digits: a digit after it stays its own
      s += code;
    } else {
      s += static_cast<char>(c);
    }
  }
  return s + "\"";
}

}  // namespace

std::string lua_literal(const json& v) {
  if (v.is_null()) return "nil";
  if (v.is_boolean() || v.is_number()) return v.dump();
  if (v.is_string()) return lua_string(v.get<std::string>());
  std::string s = "{";
  if (v.is_array()) {
    for (const json& e : v) s += (s.size() > 1 ? ", " : "") + lua_literal(e);
  } else {
    for (auto it = v.begin(); it != v.end(); ++it)
      s += (s.size() > 1 ? ", " : "") + std::string("[") + lua_string(it.key()) + "] = " + lua_literal(it.value());
  }
  return s + "}";
}

std::vector<std::string> per_slot_overrides(const json& resolved, const std::vector<HostSlots>& first_hosts,
                                            int first_workers, const std::vector<HostSlots>& hosts, int workers) {
  const std::vector<int> from = first_rank_of(slots_of(first_hosts, first_workers), slots_of(hosts, workers));
  std::vector<std::string> out;
  const std::string device = resolved.value("device", std::string("auto"));
  const struct {
    const char* key;
    std::initializer_list<const char*> path;
    json fallback;
  } lists[] = {{"emulation.speeds", {"emulation", "speeds"}, 1},
               {"emulation.comm_delay_ms", {"emulation", "comm_delay_ms"}, 0},
               {"emulation.workers", {"emulation", "workers"}, json::object()},
               {"devices", {"devices"}, device}};
  for (const auto& l : lists) {
    const json* list = find(resolved, l.path);
    if (!list) continue;
    json now = json::array();
    for (int r : from) now.push_back(r >= 0 && r < static_cast<int>(list->size()) ? (*list)[r] : l.fallback);
    out.push_back(std::string(l.key) + "=" + lua_literal(now));
  }
  if (const json* events = find(resolved, {"emulation", "events"})) {
    json now = json::array();
    for (int r = 0; r < static_cast<int>(from.size()); ++r)
      for (const json& e : *events)
        if (from[r] >= 0 && e.value("worker", -1) == from[r]) {
          json moved = e;
          moved["worker"] = r;
          now.push_back(moved);
        }
    out.push_back("emulation.events=" + lua_literal(now));
  }
  return out;
}

}  // namespace tandem
