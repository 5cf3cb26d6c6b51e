#!/usr/bin/env bash
# A one-machine Slurm cluster, for the test of tandem under srun (Debian's slurm-wlm
# and munge): slurmctld and slurmd on this machine as its only node, a config and
# state of their own under DIR, ports 16817/16818 (not Slurm's defaults, so a real
# Slurm on the machine is left alone).
#
#   one-node.sh up DIR     writes DIR/slurm.conf, starts munged (unless one runs),
#                          slurmctld and slurmd, and waits until the node is idle;
#                          then SLURM_CONF=DIR/slurm.conf srun ... runs jobs on it
#   one-node.sh down DIR   stops what `up` started (idempotent)
#
# Exits 77 (the tests' "skipped") where it cannot: not root, no slurmctld, slurmd,
# srun or munged (apt-get install slurm-wlm munge), or a node that never comes up.
set -euo pipefail

skip() {
  echo "one-node slurm: skipped: $*" >&2
  exit 77
}

need() {
  [ "$(id -u)" = 0 ] || skip "needs root (slurmd runs jobs as any user)"
  for b in slurmctld slurmd srun sinfo munged munge; do
    command -v "$b" >/dev/null || skip "no $b (apt-get install slurm-wlm munge)"
  done
}

stop_pidfile() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  local dir=$1
  stop_pidfile "$dir/slurmd.pid"
  stop_pidfile "$dir/slurmctld.pid"
  stop_pidfile "$dir/munged.pid"  # only when up started it
}

up() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  down "$dir"
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  local host
  host=$(hostname)
  cat >"$dir/slurm.conf" <<CONF
ClusterName=tandem-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldPort=16817
SlurmdPort=16818
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
  if ! munge -n >/dev/null 2>&1; then
    [ -f /etc/munge/munge.key ] || skip "no /etc/munge/munge.key (reinstall munge)"
    mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
    runuser -u munge -- munged --pid-file="$dir/munged.pid" 2>/dev/null ||
      munged --force --pid-file="$dir/munged.pid" 2>/dev/null || skip "munged does not start here"
    for _ in $(seq 1 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n >/dev/null 2>&1 || skip "munge does not answer"
  fi
  export SLURM_CONF=$dir/slurm.conf
  slurmctld || { down "$dir"; skip "slurmctld does not start (see $dir/log/slurmctld.log)"; }
  slurmd || { down "$dir"; skip "slurmd does not start (see $dir/log/slurmd.log)"; }
  for _ in $(seq 1 300); do
    if sinfo -h -o %t 2>/dev/null | grep -q '^idle'; then
      echo "one-node slurm: up (SLURM_CONF=$dir/slurm.conf)" >&2
      return 0
    fi
    sleep 0.1
  done
  down "$dir"
  skip "the node did not become idle within 30 s (see $dir/log)"
}

cmd=${1:-}
[ $# = 2 ] || { echo "usage: $0 up DIR | down DIR" >&2; exit 2; }
case "$cmd" in
  up) need; up "$2" ;;
  down) down "$2" ;;
  *) echo "usage: $0 up DIR | down DIR" >&2; exit 2 ;;
esac
