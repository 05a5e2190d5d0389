#!/usr/bin/env bash
# Load benchmark of the Foresight service over HTTP on loopback (issue 4, "Numbers to reach
# and report"), with a real load generator (oha) against the real daemon.
#
# Builds the release binary, copies it to a temp dir (so a concurrent rebuild cannot swap
# it), starts `foresight server start --listen 127.0.0.1:0` with a temp data dir, then:
#   (d) submit -> running on the idle cluster: a job `sh -c 'date +%s.%N > FILE'` is submitted
#       BENCH_LATENCY_RUNS times, one at a time; latency = the job's own timestamp minus the
#       client's clock just before the POST (same machine, same clock); median and max
#   (a) one-by-one POST /api/v1/jobs at full speed (BENCH_CONCURRENCY connections) for
#       BENCH_DURATION: jobs/s and latency percentiles
#   (b) POST /api/v1/jobs at a fixed BENCH_RATE req/s for BENCH_DURATION, with oha's
#       latency correction (no coordinated omission): p50/p99
#   (c) POST /api/v1/jobs/batch with BENCH_BATCH jobs per request (4 connections): jobs/s
#   (a)-(c) submit held jobs ("hold": true): accepted and stored, never run, so they measure
#   the submission path alone. Then the cluster is filled with BENCH_PROCS `sleep` jobs and:
#   (e) 10 000 queued global jobs are submitted (batches of 1000, timed); /metrics is sampled
#       for foresight_cycle_duration_seconds while the daemon re-plans them every second
#   (a') (b') (c') again with jobs that queue and get planned (walltime 1 h, cluster full)
#   (f) on a second, fresh daemon with a full cluster: 10 000 local jobs (the owner's
#       stream, "cluster": "local") in timed batches of 1000, then 1000 global jobs; the
#       cycle (/metrics) must forecast the local queue to plan the global jobs around it
# Before (d), 200 fsyncs of 4 KiB in the data dir's file system are timed: the submit path
# waits for SQLite's fsync, so the disk's speed at that moment is printed with the results.
# The daemon and every job it started are killed at the end (by process id, read from the
# daemon's own attempt files), also on error or Ctrl-C.
#
# Usage: scripts/bench-service.sh [--quick] [--pin] [--keep]
#   --quick   3 s per load phase, 5 latency runs, 2 000 queued jobs for (e) and (f)
#   --pin     daemon on CPU 1, load generator on CPU 0 (taskset); default: both float
#   --keep    keep the results directory (raw oha JSON, daemon log); its path is printed
# Environment (defaults in brackets):
#   BENCH_DURATION [10s, quick 3s]  BENCH_CONCURRENCY [16]  BENCH_RATE [500]
#   BENCH_BATCH [1000]  BENCH_LATENCY_RUNS [20, quick 5]  BENCH_PROCS [4]
#   BENCH_QUEUED [10000, quick 2000]  CARGO_TARGET_DIR  honoured when locating the binary
# Needs: cargo, curl, python3, taskset (only with --pin), and oha (installed with
# `cargo install oha --locked` when missing). Build output and notes go to stderr; the
# summary table goes to stdout.
# Exit status: 0 when every phase ran (targets missed or not), 1 when something failed.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

quick=0
pin=0
keep=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --pin) pin=1 ;;
    --keep) keep=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench-service: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

if ((quick)); then
  duration=${BENCH_DURATION:-3s}
  latency_runs=${BENCH_LATENCY_RUNS:-5}
  queued=${BENCH_QUEUED:-2000}
else
  duration=${BENCH_DURATION:-10s}
  latency_runs=${BENCH_LATENCY_RUNS:-20}
  queued=${BENCH_QUEUED:-10000}
fi
concurrency=${BENCH_CONCURRENCY:-16}
rate=${BENCH_RATE:-500}
batch=${BENCH_BATCH:-1000}
procs=${BENCH_PROCS:-4}

note() { echo "bench-service: $*" >&2; }
die() { note "$*"; exit 1; }

# ------------------------------------------------------------------ tools
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"
for t in cargo curl python3; do
  command -v "$t" >/dev/null 2>&1 || die "missing '$t' (needed to build, talk to the daemon and parse results)"
done
if ((pin)); then
  command -v taskset >/dev/null 2>&1 || die "--pin needs taskset (apt-get install util-linux)"
  (($(nproc) >= 2)) || die "--pin needs at least 2 CPUs"
fi
if ! command -v oha >/dev/null 2>&1; then
  note "oha not found: cargo install oha --locked (a few minutes)"
  cargo install oha --locked >&2 || die "could not install oha (cargo install oha --locked)"
fi

note "cargo build --release -p foresight-cli"
cargo build --release -p foresight-cli >&2
target_dir=${CARGO_TARGET_DIR:-target}
[[ $target_dir = /* ]] || target_dir=$root/$target_dir
[[ -x $target_dir/release/foresight ]] || die "no binary at $target_dir/release/foresight"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-service.XXXXXX")
out=$tmp/results
mkdir -p "$out" "$tmp/lat"
cp "$target_dir/release/foresight" "$tmp/foresight"

gen=()
daemon_cmd=()
if ((pin)); then
  gen=(taskset -c 0)
  daemon_cmd=(taskset -c 1)
fi

daemon_pid=
data=
blockers=()

# start_daemon NAME: a fresh daemon with its own data dir $tmp/NAME.
start_daemon() {
  data=$tmp/$1
  mkdir -p "$data"
  FORESIGHT_DATA_DIR=$data "${daemon_cmd[@]}" "$tmp/foresight" server start \
    --data-dir "$data" --listen 127.0.0.1:0 --procs "$procs" >"$data/daemon.log" 2>&1 &
  daemon_pid=$!
  blockers=()
  for _ in $(seq 100); do
    [[ -s $data/server.url && -s $data/admin.token ]] && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$data/daemon.log" >&2; daemon_pid=; die "the daemon exited"; }
    sleep 0.1
  done
  [[ -s $data/server.url ]] || die "the daemon did not write $data/server.url in 10 s"
  url=$(tr -d '[:space:]' <"$data/server.url")
  token=$(tr -d '[:space:]' <"$data/admin.token")
  auth="Authorization: Bearer $token"
  note "daemon $daemon_pid at $url, $procs processors, data in $data"
}

# stop_daemon: cancels the sleepers, stops the daemon, then kills whatever job of its data dir
# still runs (jobs outlive the daemon under detached supervisors), by the process ids the
# supervisors wrote, unless the job already ended (status.json).
stop_daemon() {
  local id d pid pgid
  if [[ -n $daemon_pid ]]; then
    for id in "${blockers[@]}"; do
      api POST "/api/v1/jobs/$id/cancel" >/dev/null 2>&1 || true
    done
    kill -TERM "$daemon_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=
  fi
  [[ -n $data ]] || return 0
  for d in "$data"/clusters/*/*/; do
    [[ -d $d && ! -e $d/status.json ]] || continue
    pgid=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("job", d)["pgid"])' "$d/job.json" 2>/dev/null) || true
    [[ $pgid =~ ^[0-9]+$ ]] && { kill -KILL -- "-$pgid" 2>/dev/null || true; }
    pid=$(tr -dc 0-9 <"$d/supervisor.pid" 2>/dev/null) || true
    [[ -n $pid ]] && { kill -KILL "$pid" 2>/dev/null || true; }
  done
  cp "$data/daemon.log" "$out/$(basename "$data").log" 2>/dev/null || true
  rm -rf "$data"
  data=
  return 0
}

cleanup() {
  local rc=$?
  set +e
  stop_daemon
  if ((keep)); then
    note "results kept in $out"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

api() { # METHOD PATH [BODY]
  curl -sS --fail-with-body -X "$1" -H "$auth" -H 'content-type: application/json' \
    ${3:+-d "$3"} "$url$2"
}

# oha PHASE [oha args...]: runs oha with JSON output into $out/PHASE.json.
load() {
  local phase=$1
  shift
  note "($phase) oha $*"
  "${gen[@]}" oha --no-tui --output-format json -o "$out/$phase.json" -H "$auth" \
    -T application/json "$@" || die "oha failed in phase $phase"
  alive "$phase"
}

alive() {
  kill -0 "$daemon_pid" 2>/dev/null && return 0
  tail -5 "$data/daemon.log" >&2
  daemon_pid=
  die "the daemon died during phase $1 (crashed, or killed from outside)"
}

start_daemon data-1
held='{"procs":1,"walltime":60,"command":["true"],"hold":true}'
queued_job='{"procs":1,"walltime":3600,"command":["true"]}'
python3 - "$batch" "$held" "$queued_job" "$out" <<'EOF'
import json, sys
n, held, queued, out = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
for name, job in (("batch-held", held), ("batch-queued", queued)):
    with open(f"{out}/{name}.body", "w") as f:
        json.dump({"jobs": [job] * n}, f)
EOF

# The submit path waits for SQLite's fsync: how fast is the disk right now?
python3 - "$tmp/fsync-probe" >"$out/fsync.json" <<'EOF'
import json, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
ts = []
for _ in range(200):
    os.write(fd, b"x" * 4096)
    t = time.perf_counter()
    os.fsync(fd)
    ts.append(time.perf_counter() - t)
os.close(fd)
os.unlink(sys.argv[1])
ts.sort()
print(json.dumps({"p50": ts[100], "p99": ts[197]}))
EOF

# ------------------------------------------------------------------ (d) submit -> running
note "(d) submit -> running, $latency_runs jobs one at a time on the idle cluster"
python3 - "$url" "$token" "$tmp/lat" "$latency_runs" >"$out/d.json" <<'EOF'
import json, os, sys, time, urllib.request
url, token, d, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
hdr = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
def call(method, path, body=None):
    req = urllib.request.Request(url + path, method=method, headers=hdr,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)
lat, acks = [], []
for i in range(runs):
    f = f"{d}/{i}"
    cmd = f"t=$(date +%s.%N); echo $t > {f}.tmp && mv {f}.tmp {f}"
    t0 = time.time()
    jid = call("POST", "/api/v1/jobs", {"procs": 1, "walltime": 60, "command": ["sh", "-c", cmd]})["id"]
    acks.append(time.time() - t0)
    deadline = time.time() + 20
    while not os.path.exists(f):
        if time.time() > deadline:
            sys.exit(f"job {jid} did not start within 20 s")
        time.sleep(0.0005)
    lat.append(float(open(f).read()) - t0)
    # Let it finish so the next one meets an idle cluster again.
    while call("GET", f"/api/v1/jobs/{jid}")["state"] not in ("completed", "failed", "cancelled", "timeout"):
        time.sleep(0.01)
    time.sleep(0.05)
print(json.dumps({"latency": lat, "ack": acks}))
EOF

# ------------------------------------------------------------------ (a)-(c) held jobs
load a -z "$duration" -w -c "$concurrency" -m POST -d "$held" "$url/api/v1/jobs"
load b -z "$duration" -w -c 64 -q "$rate" --latency-correction -m POST -d "$held" "$url/api/v1/jobs"
load c -z "$duration" -w -c 4 -m POST -D "$out/batch-held.body" "$url/api/v1/jobs/batch"

# ------------------------------------------------------------------ (e) queued jobs, cycle
# fill_cluster: BENCH_PROCS one-processor sleepers, so that nothing else starts.
fill_cluster() {
  local i id running
  for ((i = 0; i < procs; i++)); do
    id=$(api POST /api/v1/jobs '{"procs":1,"walltime":1800,"command":["sleep","1700"]}' |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    blockers+=("$id")
  done
  for _ in $(seq 100); do
    running=0
    for id in "${blockers[@]}"; do
      api GET "/api/v1/jobs/$id" | grep -q '"state":"running"' && running=$((running + 1))
    done
    ((running == procs)) && return 0
    sleep 0.1
  done
  die "the $procs sleeper jobs did not all start"
}

# queue_and_sample PHASE CLUSTER N: submits N jobs of 1 processor and 1 h in batches of 1000
# (global jobs when CLUSTER is empty, else local jobs of that cluster), timing each batch,
# then (global jobs only: they make the daemon re-plan every second) samples /metrics for 8 s
# and records the duration of every new cycle.
queue_and_sample() {
  python3 - "$url" "$token" "$3" "$out/$1.json" "$2" <<'EOF'
import json, re, sys, time, urllib.request
url, token, n, dest, cluster = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
hdr = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
job = {"procs": 1, "walltime": 3600, "command": ["true"]}
if cluster:
    job["cluster"] = cluster
sent, batches = 0, []
while sent < n:
    k = min(1000, n - sent)
    req = urllib.request.Request(url + "/api/v1/jobs/batch", method="POST", headers=hdr,
                                 data=json.dumps({"jobs": [job] * k}).encode())
    t = time.time()
    urllib.request.urlopen(req, timeout=300).read()
    batches.append({"jobs": k, "seconds": time.time() - t})
    sent += k
def metrics():
    req = urllib.request.Request(url + "/metrics", headers=hdr)
    text = urllib.request.urlopen(req, timeout=30).read().decode()
    get = lambda name: float(re.search(rf"^foresight_{name}(?:_total)? (\S+)$", text, re.M).group(1))
    return get("cycles"), get("cycle_duration_seconds"), get("queue_length")
# The daemon re-plans every second while global jobs wait.
samples, last, end = [], None, time.time() + (0 if cluster else 8)
while time.time() < end:
    c, dur, q = metrics()
    if last is not None and c != last:
        samples.append({"cycle": c, "seconds": dur, "queue": q})
    last = c
    time.sleep(0.05)
json.dump({"batches": batches, "samples": samples}, open(dest, "w"))
EOF
  alive "$1"
}

fill_cluster
note "(e) cluster full ($procs sleepers); submitting $queued queued global jobs"
queue_and_sample e "" "$queued"

# ------------------------------------------------------------------ (a') (b') queued jobs
load a2 -z "$duration" -w -c "$concurrency" -m POST -d "$queued_job" "$url/api/v1/jobs"
load b2 -z "$duration" -w -c 64 -q "$rate" --latency-correction -m POST -d "$queued_job" "$url/api/v1/jobs"
load c2 -z "$duration" -w -c 4 -m POST -D "$out/batch-queued.body" "$url/api/v1/jobs/batch"
curl -sS -H "$auth" "$url/metrics" >"$out/metrics-1.txt" || true
stop_daemon

# ------------------------------------------------------------------ (f) local queue
start_daemon data-2
fill_cluster
note "(f) submitting $queued local jobs (cluster local) behind the sleepers"
queue_and_sample f-local local "$queued"
note "(f) submitting 1000 global jobs: the planner runs every second around the local queue"
queue_and_sample f "" 1000
curl -sS -H "$auth" "$url/metrics" >"$out/metrics-2.txt" || true
stop_daemon

# ------------------------------------------------------------------ summary
python3 - "$out" "$batch" "$concurrency" "$rate" "$duration" "$procs" "$pin" "$queued" <<'EOF'
import json, os, re, statistics, sys
out, batch, conc, rate, dur, procs, pin, queued = sys.argv[1:9]
batch = int(batch)
def oha(phase):
    d = json.load(open(f"{out}/{phase}.json"))
    ok = d["statusCodeDistribution"].get("201", 0)
    bad = sum(v for k, v in d["statusCodeDistribution"].items() if k != "201")
    errs = sum(d.get("errorDistribution", {}).values())
    p = d["latencyPercentiles"]
    return ok, bad, errs, d["summary"]["total"], p
rows = []
def row(name, target, measured, ok):
    rows.append((name, target, measured, "yes" if ok else "NO"))
ms = lambda s: f"{s * 1e3:.1f} ms"
for tag, label in (("", "held"), ("2", "queued")):
    ok, bad, errs, total, p = oha("a" + tag)
    jps = ok / total
    row(f"(a{tag and chr(39)}) one-by-one, c={conc}, {label}", ">= 1000 jobs/s",
        f"{jps:.0f} jobs/s (p50 {ms(p['p50'])}, p99 {ms(p['p99'])}; non-201 {bad}, errors {errs})",
        jps >= 1000 and bad == 0)
    ok, bad, errs, total, p = oha("b" + tag)
    got = ok / total
    row(f"(b{tag and chr(39)}) {rate} req/s fixed, {label}", "p99 < 20 ms",
        f"p50 {ms(p['p50'])}, p99 {ms(p['p99'])} (achieved {got:.0f} req/s; non-201 {bad}, errors {errs})",
        p["p99"] < 0.020 and bad == 0 and got >= 0.95 * float(rate))
    ok, bad, errs, total, p = oha("c" + tag)
    jps = ok * batch / total
    row(f"(c{tag and chr(39)}) batch of {batch}, c=4, {label}", ">= 5000 jobs/s",
        f"{jps:.0f} jobs/s (p50 {ms(p['p50'])} per batch; non-201 {bad}, errors {errs})",
        jps >= 5000 and bad == 0)
d = json.load(open(f"{out}/d.json"))
lat = sorted(d["latency"])
row(f"(d) submit -> running, idle, n={len(lat)}", "< 100 ms",
    f"median {ms(statistics.median(lat))}, max {ms(lat[-1])} (201 ack median {ms(statistics.median(d['ack']))})",
    lat[-1] < 0.100)
def batches(phase, label):
    b = json.load(open(f"{out}/{phase}.json"))["batches"]
    jps = sum(x["jobs"] for x in b) / sum(x["seconds"] for x in b)
    row(label, ">= 5000 jobs/s",
        f"{jps:.0f} jobs/s (first batch {ms(b[0]['seconds'])}, last {ms(b[-1]['seconds'])})", jps >= 5000)
def cycles(phase, label):
    e = json.load(open(f"{out}/{phase}.json"))["samples"]
    s = sorted(x["seconds"] for x in e)
    if s:
        row(label, "< 100 ms", f"median {ms(statistics.median(s))}, max {ms(s[-1])} over {len(s)} cycles "
            f"(/metrics; global queue {int(e[-1]['queue'])})", s[-1] < 0.100)
    else:
        row(label, "< 100 ms", "no cycle observed", False)
batches("e", f"(e) batches of 1000 global jobs, cluster full")
cycles("e", f"(e) cycle, {queued} global jobs queued")
batches("f-local", f"(f) batches of 1000 local jobs, cluster full")
cycles("f", f"(f) cycle, {queued} local + 1000 global queued")
fs = json.load(open(f"{out}/fsync.json"))
load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else ["?"]
print(f"# foresight service, loopback, {os.cpu_count()} cpus ({'daemon on cpu 1, oha on cpu 0' if pin == '1' else 'daemon and oha unpinned, sharing the cpus'}), "
      f"{procs} processors, {dur} per phase, load average now {' '.join(load)}, "
      f"fsync of 4 KiB in the data dir p50 {ms(fs['p50'])} p99 {ms(fs['p99'])}")
w = [max(len(r[i]) for r in rows) for i in range(3)]
print(f"{'phase':<{w[0]}}  {'target':<{w[1]}}  {'measured':<{w[2]}}  met")
for r in rows:
    print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]}")
EOF
