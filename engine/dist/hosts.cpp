#include "engine/dist/hosts.hpp"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

int parse_slots(const std::string& text, const std::string& where) {
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  TANDEM_CHECK_HINT(!text.empty() && *end == '\0' && n >= 1 && n <= 1 << 20, "give slots as a whole number, 1 or more",
                    where, ": slots '", text, "' is not a count of ranks");
  return static_cast<int>(n);
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

void refuse_repeats(const std::vector<HostSlots>& hosts, const std::string& where) {
  std::set<std::string> seen;
  for (const HostSlots& h : hosts)
    TANDEM_CHECK_HINT(seen.insert(h.name).second, "list each host once, with all its slots",
                      where, ": host '", h.name, "' is listed twice");
}

}  // namespace

std::vector<HostSlots> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  TANDEM_CHECK_HINT(in.good(), "give an OpenMPI hostfile: a line 'HOST slots=N' per host",
                    "cannot read the hostfile '", path, "'");
  std::vector<HostSlots> hosts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    HostSlots h;
    if (!(words >> h.name)) continue;
    const std::string where = path + ":" + std::to_string(n);
    for (std::string w; words >> w;) {
      if (w.rfind("slots=", 0) == 0) {
        h.slots = parse_slots(w.substr(6), where);
      } else {
        TANDEM_CHECK_HINT(w.rfind("max_slots=", 0) == 0 || w.rfind("max-slots=", 0) == 0,
                          "write 'HOST slots=N' (OpenMPI's hostfile syntax)", where, ": unknown word '", w, "'");
      }
    }
    hosts.push_back(h);
  }
  // An empty file is most likely one being rewritten, or the wrong one: never "no hosts,
  // so this machine".
  TANDEM_CHECK_HINT(!hosts.empty(), "add a line 'HOST slots=N' per host", "the hostfile '", path,
                    "' lists no host");
  refuse_repeats(hosts, path);
  return hosts;
}

std::vector<HostSlots> parse_host_list(const std::string& list) {
  std::vector<HostSlots> hosts;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    item = trimmed(item);
    if (item.empty()) continue;
    HostSlots h;
    const size_t colon = item.find(':');
    TANDEM_CHECK_HINT(colon == item.rfind(':'), "name IPv6 hosts in a hostfile, or by a host name", "hosts '", list,
                      "': '", item, "' has more than one ':' (host:slots)");
    h.name = trimmed(item.substr(0, colon));
    if (colon != std::string::npos) h.slots = parse_slots(trimmed(item.substr(colon + 1)), "hosts '" + list + "'");
    TANDEM_CHECK_HINT(!h.name.empty(), "write hosts as 'a:2,b:2'", "hosts '", list, "': an entry names no host");
    hosts.push_back(h);
  }
  TANDEM_CHECK_HINT(!hosts.empty() || trimmed(list).empty(), "write hosts as 'a:2,b:2'", "hosts '", list,
                    "' names no host");
  refuse_repeats(hosts, "hosts '" + list + "'");
  return hosts;
}

std::vector<HostSlots> job_hosts(const std::string& hostfile, const std::string& list) {
  std::vector<HostSlots> hosts = hostfile.empty() ? std::vector<HostSlots>{} : read_hostfile(hostfile);
  for (const HostSlots& h : parse_host_list(list)) hosts.push_back(h);
  refuse_repeats(hosts, "the hostfile and hosts together");
  return hosts;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  long n = 0;
  for (const HostSlots& h : hosts) n += h.slots;
  return static_cast<int>(std::min<long>(n, INT_MAX));
}

int slots_given(const std::vector<std::string>& overrides) {
  std::string hostfile, list;
  for (const std::string& o : overrides) {
    // As the loader reads an override (scripts/tandem/experiment.lua): the key and the
    // text trimmed; a string setting takes the text as it is.
    const size_t eq = o.find('=');
    const std::string key = trimmed(o.substr(0, eq)), value = eq == std::string::npos ? "" : trimmed(o.substr(eq + 1));
    if (key == "workers") return 0;
    if (key == "hostfile") hostfile = value;
    if (key == "hosts") list = value;
  }
  return hostfile.empty() && list.empty() ? 0 : total_slots(job_hosts(hostfile, list));
}

std::string host_list(const std::vector<HostSlots>& hosts) {
  std::string s;
  for (const HostSlots& h : hosts) s += (s.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
  return s;
}

std::vector<int> rank_hosts(const std::vector<HostSlots>& hosts, int workers) {
  std::vector<int> of;
  for (int h = 0; h < static_cast<int>(hosts.size()); ++h)
    for (int s = 0; s < hosts[h].slots && static_cast<int>(of.size()) < workers; ++s) of.push_back(h);
  return of;
}

}  // namespace tandem
