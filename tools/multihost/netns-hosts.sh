#!/usr/bin/env bash
# Several "hosts" on one machine, for tests and trials of tandem across hosts: each
# host is a network namespace (tandem-h0, tandem-h1, ...) with its own veth link into
# one bridge (tandem-br0, 10.77.0.254/24 in the root namespace, where mpirun runs).
# Host i is 10.77.0.(i+1). OpenMPI reaches them through an rsh agent that runs the
# daemon's command in the host's namespace (and in a UTS namespace of its own, so the
# host has its own hostname): no ssh. Every host sees this machine's file system, so
# "the same paths on every host" holds by construction. `tc netem` on a host's link
# gives it real latency and bandwidth limits.
#
#   netns-hosts.sh up K DIR        K hosts; writes DIR/hostfile, DIR/rsh-agent and
#                                  DIR/mpirun-flags (the --mca flags to use)
#   netns-hosts.sh netem I DELAY [RATE]   host I's link: DELAY (e.g. 20ms) each way,
#                                  RATE (e.g. 100mbit) each way; replaces any earlier.
#                                  Exits 77 where the kernel has no netem
#                                  (CONFIG_NET_SCH_NETEM unset, as on some VMs)
#   netns-hosts.sh rate I RATE     host I's link limited to RATE (e.g. 40mbit) each
#                                  way with tbf, which kernels without netem have
#   netns-hosts.sh clear-netem I   host I's link back to unlimited (either kind)
#   netns-hosts.sh down            ends the processes left in the tandem-h* namespaces,
#                                  removes them, their links and the bridge (leftovers
#                                  of a crashed run too); idempotent
#
# The names are fixed: one set of hosts per machine at a time.
#   netns-hosts.sh run K DIR [--netem I DELAY [RATE]] -- CMD...
#                                  up, CMD with $TANDEM_HOSTFILE and $TANDEM_MPIRUN_FLAGS
#                                  set, then down (also on failure or a signal)
#
# Exits 77 (the tests' "skipped") where it cannot: not root, no `ip netns`, no tc,
# no mpirun, or a kernel that refuses namespaces, veth or bridges (some containers).
set -euo pipefail

PREFIX=tandem-h
BRIDGE=tandem-br0
SUBNET=10.77.0
BRIDGE_IP=$SUBNET.254

skip() {
  echo "netns-hosts: skipped: $*" >&2
  exit 77
}

need() {
  [ "$(id -u)" = 0 ] || skip "needs root (network namespaces, veth and tc)"
  command -v ip >/dev/null || skip "no ip (install iproute2)"
  command -v tc >/dev/null || skip "no tc (install iproute2)"
  command -v mpirun >/dev/null || skip "no mpirun (install openmpi-bin)"
  command -v unshare >/dev/null || skip "no unshare (install util-linux)"
  ip netns list >/dev/null 2>&1 || skip "ip netns does not work here"
}

down() {
  local ns link
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${PREFIX}[0-9]*$" || true); do
    # What still runs on the host (daemons and ranks of a job cut short): only
    # processes started there, by id; deleting the namespace would not end them.
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086  # one word per pid
    if [ -n "$pids" ]; then kill -KILL $pids 2>/dev/null || true; fi
    ip netns del "$ns" 2>/dev/null || true  # takes its end of the veth, and so the pair
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^tandem-v[0-9]*$' || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
}

up() {
  local k=$1 dir=$2 i
  if ! [[ $k =~ ^[0-9]+$ ]] || [ "$k" -lt 1 ] || [ "$k" -gt 200 ]; then
    echo "netns-hosts: K must be 1..200" >&2
    exit 2
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  down  # leftovers of a crashed run
  ip link add "$BRIDGE" type bridge 2>/dev/null || { down; skip "cannot create a bridge here"; }
  # Bridged frames must not meet the host's iptables (br_netfilter), which may drop them.
  ip link set "$BRIDGE" type bridge nf_call_iptables 0 2>/dev/null || true
  ip addr add "$BRIDGE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  : >"$dir/hostfile"
  cat >"$dir/rsh-agent" <<'EOF'
#!/bin/sh
# OpenMPI rsh agent: "rsh-agent HOST COMMAND..." runs COMMAND in HOST's namespace.
host=$1; shift
case "$host" in
EOF
  for ((i = 0; i < k; i++)); do
    local ns=$PREFIX$i ip=$SUBNET.$((i + 1))
    ip netns add "$ns" || { down; skip "cannot create network namespace $ns"; }
    ip link add "tandem-v$i" type veth peer name eth0 netns "$ns" || { down; skip "cannot create veth pairs here"; }
    ip link set "tandem-v$i" master "$BRIDGE" up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    echo "$ip slots=64" >>"$dir/hostfile"
    echo "  $ip|$ns) ns=$ns ;;" >>"$dir/rsh-agent"
  done
  cat >>"$dir/rsh-agent" <<'EOF'
  *) echo "rsh-agent: unknown host $host" >&2; exit 255 ;;
esac
# Like ssh: the words are one command line for a shell. Its own hostname (UTS
# namespace), as a separate machine would have.
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1"; shift; exec sh -c "$*"' - "$ns" "$@"
EOF
  chmod +x "$dir/rsh-agent"
  # Reachable from the root namespace (where mpirun runs) and from each other.
  if command -v ping >/dev/null; then
    for ((i = 0; i < k; i++)); do
      ping -c 1 -W 2 "$SUBNET.$((i + 1))" >/dev/null 2>&1 || { down; skip "host $SUBNET.$((i + 1)) does not answer ping"; }
    done
  fi
  # TCP only, on the hosts' subnet; no shared-memory BTL (it cannot cross hosts);
  # daemons started directly by mpirun through the agent.
  echo "--mca plm_rsh_agent $dir/rsh-agent --mca plm_rsh_no_tree_spawn 1 --mca btl tcp,self" \
    "--mca btl_tcp_if_include $SUBNET.0/24 --mca oob_tcp_if_include $SUBNET.0/24" >"$dir/mpirun-flags"
  echo "netns-hosts: $k hosts up ($SUBNET.1..$SUBNET.$k), hostfile $dir/hostfile" >&2
}

# Both directions of host I's link: out of the host (its eth0) and into it (the
# bridge's port), each with the qdisc "$@".
qdisc_both() {
  local i=$1
  shift
  ip netns exec "$PREFIX$i" tc qdisc replace dev eth0 root "$@" && tc qdisc replace dev "tandem-v$i" root "$@"
}

netem() {
  local i=$1 delay=$2 rate=${3:-}
  local args=(delay "$delay")
  [ -n "$rate" ] && args+=(rate "$rate")
  if ! qdisc_both "$i" netem "${args[@]}" 2>/dev/null; then
    clear_netem "$i"
    skip "tc netem does not work here (a kernel without CONFIG_NET_SCH_NETEM?); 'rate I RATE' limits bandwidth with tbf"
  fi
}

rate() {
  local i=$1 r=$2
  # A token bucket of 16 kB (a few packets at line rate) and a queue deep enough
  # that TCP meets the rate, not drops.
  qdisc_both "$i" tbf rate "$r" burst 16kb limit 4mb || { clear_netem "$i"; skip "tc tbf does not work here"; }
}

clear_netem() {
  local i=$1
  ip netns exec "$PREFIX$i" tc qdisc del dev eth0 root 2>/dev/null || true
  tc qdisc del dev "tandem-v$i" root 2>/dev/null || true
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) [ $# = 2 ] || { echo "usage: $0 up K DIR" >&2; exit 2; }; need; up "$1" "$2" ;;
  down) need; down ;;
  netem) [ $# -ge 2 ] || { echo "usage: $0 netem I DELAY [RATE]" >&2; exit 2; }; need; netem "$@" ;;
  rate) [ $# = 2 ] || { echo "usage: $0 rate I RATE" >&2; exit 2; }; need; rate "$1" "$2" ;;
  clear-netem) [ $# = 1 ] || { echo "usage: $0 clear-netem I" >&2; exit 2; }; need; clear_netem "$1" ;;
  run)
    [ $# -ge 3 ] || { echo "usage: $0 run K DIR [--netem I DELAY [RATE]] -- CMD..." >&2; exit 2; }
    need
    k=$1 dir=$2
    shift 2
    netem_args=()
    if [ "${1:-}" = --netem ]; then
      shift
      while [ $# -gt 0 ] && [ "$1" != -- ]; do netem_args+=("$1"); shift; done
    fi
    [ "${1:-}" = -- ] && shift
    trap down EXIT
    trap 'exit 130' INT TERM
    up "$k" "$dir"
    [ ${#netem_args[@]} -gt 0 ] && netem "${netem_args[@]}"
    dir=$(cd "$dir" && pwd)
    TANDEM_MPIRUN_FLAGS=$(cat "$dir/mpirun-flags")
    export TANDEM_HOSTFILE=$dir/hostfile TANDEM_MPIRUN_FLAGS
    set +e
    "$@"
    rc=$?
    exit $rc
    ;;
  *) echo "usage: $0 up K DIR | netem I DELAY [RATE] | rate I RATE | clear-netem I | down | run K DIR [--netem I DELAY [RATE]] -- CMD..." >&2; exit 2 ;;
esac
