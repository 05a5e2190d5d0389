#!/usr/bin/env bash
# Real Slurm clusters on this one host, for Foresight's Slurm integration tests.
#
# Usage: scripts/local-slurm.sh start [N] | stop [--purge] | status
#   start [N]  install Debian's Slurm 22.05 (slurmctld, slurmd, slurm-client) and munge when
#              missing, then bring up N (default 2) independent single-host clusters c1..cN on
#              loopback, each with its own munged, slurmctld and one slurmd per virtual node,
#              and wait until every node is usable (idle; or busy with jobs that survived a
#              controller restart). Idempotent: running daemons are left alone, dead ones are
#              restarted, a cluster whose generated slurm.conf changed is restarted.
#              stdout: one line per cluster, `NAME=/abs/path/slurm.conf`, nothing else.
#              Also written: BASE/clusters (the same lines) and BASE/env
#              (FORESIGHT_SLURM_CONFS=c1=...,c2=...), for `source`.
#   stop       cancel every job of every cluster under BASE, then stop exactly the daemons
#              this script started: the pids in its pid files, each signalled only if
#              /proc/PID/comm still names the expected daemon (SIGTERM, SIGKILL after 10 s).
#              --purge also deletes BASE.
#   status     one line per cluster under BASE:
#              `NAME up|down|partial conf=PATH slurmctld=PID|- slurmd=UP/TOTAL munged=PID|- nodes=STATE:COUNT,...`
#              Exit 0 when every cluster is up, 1 otherwise (or when there is none).
#
# Cluster i (1-based) is named ci. It lives in BASE/ci/{etc,state,spool,log,run,munge,jobs};
# its nodes are ci-n1..ci-nNODES (NodeHostname=localhost, one slurmd each on its own port,
# which Debian's multiple-slurmd build allows), each advertising CPUS CPUs whatever the host
# has (SlurmdParameters=config_overrides), all in partition `debug` (DefaultTime 1 h).
# Ports: slurmctld PORT_BASE+100*(i-1), slurmd of node k PORT_BASE+100*(i-1)+k.
# BASE/ci/jobs is mode 1777: a place for job output of any user (use sbatch --chdir/-o there).
#
# The daemons run as root (SlurmUser=root), so root may create reservations
# (`scontrol create reservation ... Users=root`); without slurmdbd no other user can be made
# a Slurm operator. A second, unprivileged user (OTHER_USER, created as a system user when
# missing) stands for a site's own users submitting straight to Slurm:
#   runuser -u fsowner -- env SLURM_CONF=... sbatch --chdir=BASE/c1/jobs ...
#
# State: a fresh start (new directory, or after `stop`) wipes the controller's state, so job
# ids start at 1 (in every cluster: ids are not unique across clusters). When a slurmctld
# died (killed by a test) its state is kept when `start` brings it back, so jobs survive and
# can be reconciled. FORESIGHT_SLURM_KEEP_STATE=1 always keeps it.
#
# Environment:
#   FORESIGHT_SLURM_DIR         BASE                                   [/tmp/foresight-slurm]
#   FORESIGHT_SLURM_NODES       virtual nodes per cluster, 1..99       [4]
#   FORESIGHT_SLURM_CPUS        CPUs per node                          [2]
#   FORESIGHT_SLURM_MEM_MB      RealMemory per node                    [2000]
#   FORESIGHT_SLURM_PORT_BASE   first port                             [16800]
#   FORESIGHT_SLURM_OTHER_USER  the second (local) user                [fsowner]
#   FORESIGHT_SLURM_WAIT        seconds to wait for the nodes          [60]
#   FORESIGHT_SLURM_KEEP_STATE  1 = keep controller state on every start [0]
#   FORESIGHT_SLURM_NO_INSTALL  1 = never call apt-get                 [0]
#   FORESIGHT_SLURM_SCHED_PARAMS SchedulerParameters
#                               [batch_sched_delay=0,sched_min_interval=0,bf_interval=1]
# Progress and errors go to stderr. Needs root (apt-get, daemons as SlurmUser=root).
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

BASE="${FORESIGHT_SLURM_DIR:-/tmp/foresight-slurm}"
NODES="${FORESIGHT_SLURM_NODES:-4}"
CPUS="${FORESIGHT_SLURM_CPUS:-2}"
MEM="${FORESIGHT_SLURM_MEM_MB:-2000}"
PORT_BASE="${FORESIGHT_SLURM_PORT_BASE:-16800}"
OTHER_USER="${FORESIGHT_SLURM_OTHER_USER:-fsowner}"
WAIT="${FORESIGHT_SLURM_WAIT:-60}"
KEEP_STATE="${FORESIGHT_SLURM_KEEP_STATE:-0}"
NO_INSTALL="${FORESIGHT_SLURM_NO_INSTALL:-0}"
SCHED_PARAMS="${FORESIGHT_SLURM_SCHED_PARAMS:-batch_sched_delay=0,sched_min_interval=0,bf_interval=1}"

log() { echo "[local-slurm] $*" >&2; }
die() { log "$*"; exit 1; }

# alive PIDFILE COMM: the pid in PIDFILE runs, is not a zombie, and its comm starts with COMM.
alive() {
  local f="$1" comm="$2" pid
  [[ -s "$f" ]] || return 1
  pid="$(tr -dc 0-9 2>/dev/null <"$f")" || return 1
  [[ -n "$pid" && -r "/proc/$pid/comm" ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == "$comm"* ]] || return 1
  ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

pid_of() { tr -dc 0-9 2>/dev/null <"$1" || true; }

# stop_pidfile PIDFILE COMM: SIGTERM the recorded daemon, SIGKILL after 10 s; forget the file.
stop_pidfile() {
  local f="$1" comm="$2" pid
  if ! alive "$f" "$comm"; then rm -f "$f"; return 0; fi
  pid="$(pid_of "$f")"
  log "stopping $comm (pid $pid)"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do alive "$f" "$comm" || break; sleep 0.2; done
  if alive "$f" "$comm"; then
    log "$comm (pid $pid) ignored SIGTERM, sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# The cluster directories under BASE, in order c1, c2, ...
clusters_in_base() {
  local d
  for d in "$BASE"/c[0-9]*/; do
    [[ -f "$d/etc/slurm.conf" ]] && basename "$d"
  done | sort -V
}

install_packages() {
  local pkgs=(munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins) missing=() p
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  [[ "$NO_INSTALL" == 1 ]] && die "missing packages: ${missing[*]} (FORESIGHT_SLURM_NO_INSTALL=1)"
  [[ $EUID -eq 0 ]] || die "need root to apt-get install ${missing[*]}"
  log "installing ${missing[*]}"
  # Keep the packages from starting their own system services on default paths on hosts with
  # an init system: we run private daemons. (Containers often have a policy-rc.d already.)
  local added_policy=0 t0 aptlog="$BASE/apt.log"
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    added_policy=1
  fi
  t0=$(date +%s)
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$aptlog" 2>&1; then
    # no package lists yet (fresh image) or stale ones
    if ! { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; } >>"$aptlog" 2>&1; then
      if ((added_policy)); then rm -f /usr/sbin/policy-rc.d; fi
      tail -n 20 "$aptlog" >&2
      die "apt-get failed, see $aptlog"
    fi
  fi
  if ((added_policy)); then rm -f /usr/sbin/policy-rc.d; fi
  log "installed in $(($(date +%s) - t0)) s"
}

ensure_other_user() {
  getent passwd "$OTHER_USER" >/dev/null && return 0
  log "creating system user $OTHER_USER"
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$OTHER_USER"
}

write_conf() { # write_conf NAME DIR INDEX -> DIR/etc/slurm.conf.new
  local name="$1" c="$2" i="$3" p ctld nd nodelist ports
  p=$((PORT_BASE + 100 * (i - 1)))
  ctld=$p
  nd=$((p + 1))
  nodelist="${name}-n[1-$NODES]"
  ports="$nd-$((nd + NODES - 1))"
  if ((NODES == 1)); then nodelist="${name}-n1"; ports="$nd"; fi
  cat >"$c/etc/slurm.conf.new" <<EOF
# generated by foresight scripts/local-slurm.sh -- cluster $name
ClusterName=$name
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$c/munge/munge.sock
StateSaveLocation=$c/state
SlurmdSpoolDir=$c/spool/%n
SlurmctldPidFile=$c/run/slurmctld.pid
SlurmdPidFile=$c/run/slurmd-%n.pid
SlurmctldLogFile=$c/log/slurmctld.log
SlurmdLogFile=$c/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$c/log/jobcomp.txt
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=$SCHED_PARAMS
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightJobSize=1000
PriorityMaxAge=1-0
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=600
InactiveLimit=0
NodeName=$nodelist NodeHostname=localhost NodeAddr=127.0.0.1 Port=$ports CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES DefaultTime=01:00:00 MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

start_cluster() { # start_cluster NAME INDEX
  local name="$1" i="$2" c="$BASE/$1" n node f
  mkdir -p "$c"/{etc,state,spool,log,run,munge,jobs}
  chmod 711 "$c/munge" # munged wants an all-executable socket directory
  chmod 1777 "$c/jobs"
  write_conf "$name" "$c" "$i"
  if ! cmp -s "$c/etc/slurm.conf" "$c/etc/slurm.conf.new" 2>/dev/null && alive "$c/run/slurmctld.pid" slurmctld; then
    log "$name: configuration changed, restarting its daemons"
    for f in "$c"/run/slurmd-*.pid; do
      if [[ -e "$f" ]]; then stop_pidfile "$f" slurmd; fi
    done
    stop_pidfile "$c/run/slurmctld.pid" slurmctld
  fi
  mv "$c/etc/slurm.conf.new" "$c/etc/slurm.conf"
  export SLURM_CONF="$c/etc/slurm.conf"

  if ! alive "$c/munge/munged.pid" munged; then
    rm -f "$c/munge/munge.sock" "$c/munge/munge.sock.lock"
    munged --socket="$c/munge/munge.sock" --key-file="$BASE/munge.key" \
      --pid-file="$c/munge/munged.pid" --log-file="$c/munge/munged.log" \
      --seed-file="$c/munge/munged.seed"
    for _ in $(seq 1 50); do [[ -S "$c/munge/munge.sock" ]] && break; sleep 0.1; done
  fi

  if ! alive "$c/run/slurmctld.pid" slurmctld; then
    # A clean start (the first one, or after `stop`) begins with empty state; a controller
    # that died while the cluster was active is brought back with its state, as a site's
    # would be. run/active marks a started cluster until `stop`.
    if [[ -e "$c/run/active" || "$KEEP_STATE" == 1 ]]; then
      log "$name: starting slurmctld with its saved state"
    else
      rm -rf "${c:?}/state/"*
    fi
    slurmctld -i # daemonizes, writes SlurmctldPidFile
    : >"$c/run/active"
  fi
  for ((n = 1; n <= NODES; n++)); do
    node="${name}-n$n"
    mkdir -p "$c/spool/$node"
    alive "$c/run/slurmd-$node.pid" slurmd || slurmd -N "$node" # daemonizes, writes its pid file
  done
}

wait_usable() { # wait_usable NAME DEADLINE
  local name="$1" deadline="$2" c="$BASE/$1" states
  export SLURM_CONF="$c/etc/slurm.conf"
  while :; do
    # usable = responding and idle (or busy with jobs); not unknown, down, drain, inval, idle*
    states="$(sinfo -h -N -o '%T' 2>/dev/null | sort -u || true)"
    if [[ -n "$states" ]] && ! grep -qvxE 'idle|mixed|allocated|completing|reserved' <<<"$states"; then
      return 0
    fi
    if (($(date +%s) > deadline)); then
      log "$name: nodes not usable after ${WAIT} s (states: $(tr '\n' ' ' <<<"$states"))"
      tail -n 20 "$c/log/slurmctld.log" >&2 || true
      exit 1
    fi
    sleep 0.2
  done
}

cmd_start() {
  local count="${1:-2}" i name deadline confs=() lines=()
  [[ "$count" =~ ^[1-9][0-9]*$ ]] && ((count <= 50)) || die "start: N must be 1..50, got '$count'"
  [[ "$NODES" =~ ^[1-9][0-9]?$ ]] || die "FORESIGHT_SLURM_NODES must be 1..99"
  [[ $EUID -eq 0 ]] || die "must run as root (apt-get; the daemons run as SlurmUser=root)"
  mkdir -p "$BASE"
  BASE="$(cd "$BASE" && pwd)" # slurm.conf needs absolute paths
  chmod 755 "$BASE"
  install_packages
  ensure_other_user
  if [[ ! -s "$BASE/munge.key" ]]; then
    (umask 077 && dd if=/dev/urandom of="$BASE/munge.key" bs=1024 count=1 status=none)
  fi
  chmod 600 "$BASE/munge.key"
  for ((i = 1; i <= count; i++)); do start_cluster "c$i" "$i"; done
  deadline=$(($(date +%s) + WAIT))
  for ((i = 1; i <= count; i++)); do
    name="c$i"
    wait_usable "$name" "$deadline"
    lines+=("$name=$BASE/$name/etc/slurm.conf")
    confs+=("$name=$BASE/$name/etc/slurm.conf")
  done
  printf '%s\n' "${lines[@]}" >"$BASE/clusters"
  (IFS=,; echo "FORESIGHT_SLURM_CONFS=${confs[*]}") >"$BASE/env"
  log "$count cluster(s) up: $NODES nodes x $CPUS CPUs each; other user: $OTHER_USER; env: $BASE/env"
  printf '%s\n' "${lines[@]}"
}

cmd_stop() {
  local purge=0 a name c ids
  for a in "$@"; do
    case "$a" in
      --purge) purge=1 ;;
      *) die "stop: unknown argument '$a'" ;;
    esac
  done
  [[ -d "$BASE" ]] || { log "nothing to stop ($BASE does not exist)"; return 0; }
  BASE="$(cd "$BASE" && pwd)"
  for name in $(clusters_in_base); do
    c="$BASE/$name"
    export SLURM_CONF="$c/etc/slurm.conf"
    if alive "$c/run/slurmctld.pid" slurmctld; then
      # Cancel every job first: slurmstepd and the job processes re-parent to init and would
      # outlive the cluster.
      ids="$(squeue -h -o '%i' 2>/dev/null | tr '\n' ' ' || true)"
      if [[ -n "${ids// /}" ]]; then
        log "$name: cancelling jobs $ids"
        # shellcheck disable=SC2086
        scancel $ids 2>/dev/null || true
        for _ in $(seq 1 60); do
          [[ -z "$(squeue -h -o '%i' 2>/dev/null || true)" ]] && break
          sleep 0.25
        done
      fi
    fi
    for f in "$c"/run/slurmd-*.pid; do
      if [[ -e "$f" ]]; then stop_pidfile "$f" slurmd; fi
    done
    stop_pidfile "$c/run/slurmctld.pid" slurmctld
    stop_pidfile "$c/munge/munged.pid" munged
    rm -f "$c/munge/munge.sock" "$c/munge/munge.sock.lock" "$c/run/active"
    log "$name: stopped"
  done
  if ((purge)); then
    rm -rf "${BASE:?}"
    log "purged $BASE"
  fi
}

cmd_status() {
  local name c up total f ctld munged nodes state any=0 all=1
  [[ -d "$BASE" ]] || { log "no clusters ($BASE does not exist)"; return 1; }
  BASE="$(cd "$BASE" && pwd)"
  for name in $(clusters_in_base); do
    any=1
    c="$BASE/$name"
    up=0
    total=0
    for f in "$c"/run/slurmd-*.pid; do
      [[ -e "$f" ]] || continue
      total=$((total + 1))
      alive "$f" slurmd && up=$((up + 1))
    done
    ctld=-
    munged=-
    alive "$c/run/slurmctld.pid" slurmctld && ctld="$(pid_of "$c/run/slurmctld.pid")"
    alive "$c/munge/munged.pid" munged && munged="$(pid_of "$c/munge/munged.pid")"
    nodes=-
    if [[ "$ctld" != - ]]; then
      nodes="$(SLURM_CONF="$c/etc/slurm.conf" sinfo -h -N -o '%T' 2>/dev/null | sort | uniq -c |
        awk '{printf "%s%s:%s", (NR > 1 ? "," : ""), $2, $1}' || true)"
      [[ -n "$nodes" ]] || nodes=unreachable
    fi
    if [[ "$ctld" != - && "$munged" != - && $total -gt 0 && $up -eq $total ]]; then
      state=up
    elif [[ "$ctld" == - && "$munged" == - && $up -eq 0 ]]; then
      state=down
      all=0
    else
      state=partial
      all=0
    fi
    echo "$name $state conf=$c/etc/slurm.conf slurmctld=$ctld slurmd=$up/$total munged=$munged nodes=$nodes"
  done
  ((any)) || { log "no clusters under $BASE"; return 1; }
  ((all))
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  status) cmd_status "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
