#!/usr/bin/env bash
# The Slurm numbers of issue 5, measured on real Slurm clusters started by
# `scripts/local-slurm.sh start 2` (4 nodes x 2 CPUs each), with the real daemon.
#
#   (a) submit -> running of a global job on idle Slurm clusters: a job `date +%s.%N > FILE`
#       is submitted BENCH_RUNS times, one at a time; latency = the job's own timestamp minus
#       the client's clock just before the submission (same host, same clock). What bounds it
#       is printed from the parts: our cycle + scontrol + sbatch, then Slurm's scheduling.
#   (b) start skew of a 12-processor job (larger than either cluster), co-allocated on both:
#       Slurm's start_time of each part, BENCH_RUNS times; max and mean
#       (`foresight_coallocation_skew_seconds_*` in /metrics say the same).
#   (c) Slurm commands per cycle with BENCH_QUEUED (100) global jobs queued: the counter
#       `foresight_slurm_commands` and `foresight_cycles` / `foresight_cluster_snapshots` over
#       BENCH_WINDOW seconds, while the queue is planned every cycle; per cycle, per snapshot,
#       and per job reserved.
#   (d) forecast accuracy with local jobs competing: the site's own jobs (user fsowner,
#       straight to Slurm) fill part of c1, global jobs are submitted around them; every job
#       runs for nearly its whole limit (so the error measured is the forecast's, not the
#       users' overestimates); |first planned start - actual start| per global job.
# The daemon runs with its own instance name (`bench`), so it touches nothing of another
# Foresight instance on the same clusters; everything it and this script submitted is cancelled
# at the end, also on error or Ctrl-C.
#
# Usage: scripts/bench-slurm.sh
# Environment: BENCH_RUNS [5]  BENCH_QUEUED [100]  BENCH_WINDOW [20]
#   FORESIGHT_SLURM_DIR [/tmp/foresight-slurm]  CARGO_TARGET_DIR
# Needs: root (runuser for the site's jobs), cargo, curl, jq, the clusters up.
set -euo pipefail

RUNS="${BENCH_RUNS:-5}"
QUEUED="${BENCH_QUEUED:-100}"
WINDOW="${BENCH_WINDOW:-20}"
SLURM_DIR="${FORESIGHT_SLURM_DIR:-/tmp/foresight-slurm}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
say() { printf '[bench-slurm] %s\n' "$*" >&2; }

for c in c1 c2; do
    [ -f "$SLURM_DIR/$c/etc/slurm.conf" ] || {
        say "no cluster $c under $SLURM_DIR: run scripts/local-slurm.sh start 2 first"
        exit 1
    }
done
C1="$SLURM_DIR/c1/etc/slurm.conf"
C2="$SLURM_DIR/c2/etc/slurm.conf"

say "building"
(cd "$ROOT" && cargo build --release -p foresight-cli >&2)
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
WORK="$(mktemp -d /tmp/foresight-bench-slurm.XXXXXX)"
chmod 755 "$WORK"
cp "$TARGET/release/foresight" "$WORK/foresight"
F="$WORK/foresight"
DATA="$WORK/data"
cat > "$WORK/foresight.toml" <<EOF
instance = "bench"
listen = "127.0.0.1:0"
data_dir = "$DATA"
lead_time_seconds = 30
cycle_ms = 200

[[cluster]]
name = "c1"
kind = "slurm"
slurm_conf = "$C1"
sync_ms = 1000

[[cluster]]
name = "c2"
kind = "slurm"
slurm_conf = "$C2"
sync_ms = 1000
EOF

DAEMON=""
cleanup() {
    [ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null || true
    for conf in "$C1" "$C2"; do
        ids=$(SLURM_CONF=$conf squeue --json 2>/dev/null \
            | jq -r '.jobs[] | select((.name | startswith("bench-")) or (.name == "bench-local")) | .job_id' || true)
        [ -n "$ids" ] && SLURM_CONF=$conf scancel $ids 2>/dev/null || true
        for r in $(SLURM_CONF=$conf scontrol show res -o 2>/dev/null | grep -o 'ReservationName=bench-[0-9]*' | cut -d= -f2); do
            SLURM_CONF=$conf scontrol delete reservation "$r" 2>/dev/null || true
        done
    done
    say "results and daemon log in $WORK"
}
trap cleanup EXIT INT TERM

"$F" server start --config "$WORK/foresight.toml" > "$WORK/daemon.log" 2>&1 &
DAEMON=$!
for _ in $(seq 100); do [ -f "$DATA/server.url" ] && break; sleep 0.1; done
export FORESIGHT_DATA_DIR="$DATA"
URL="$(cat "$DATA/server.url")"
TOKEN="$(cat "$DATA/admin.token")"
# /metrics needs a token like every route; a refused read stops the script rather than
# printing empty figures.
metric() {
    local page
    page=$(curl -sS --fail-with-body -H "Authorization: Bearer $TOKEN" "$URL/metrics") \
        || { echo "reading $URL/metrics failed: $page" >&2; exit 1; }
    awk -v m="$1" '$1 == m { print $2 }' <<<"$page"
}
job_json() { curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/jobs/$1"; }
wait_state() { # id state...
    local id=$1; shift
    for _ in $(seq 600); do
        s=$(job_json "$id" | jq -r .state)
        for want in "$@"; do [ "$s" = "$want" ] && return 0; done
        sleep 0.2
    done
    say "job $id stuck in $s"
    return 1
}
sleep 2 # first snapshots

say "(a) submit -> running on idle clusters, $RUNS runs"
lat=()
for i in $(seq "$RUNS"); do
    out="$SLURM_DIR/c1/jobs/bench-$$-$i"
    t0=$(date +%s.%N)
    id=$("$F" job submit -n 1 -t 1m --no-coallocation -- sh -c "date +%s.%N > $out")
    wait_state "$id" completed failed
    t1=$(cat "$out" 2>/dev/null || echo "$t0")
    rm -f "$out"
    lat+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.3f", a - b }')")
done
printf '(a) submit -> running (s):'; printf ' %.2f' "${lat[@]}"; echo
printf '%s\n' "${lat[@]}" | sort -n | awk '{a[NR]=$1} END {printf "    median %.2f s, max %.2f s\n", a[int((NR+1)/2)], a[NR]}'

say "(b) co-allocation skew, $RUNS runs"
skews=()
for i in $(seq "$RUNS"); do
    id=$("$F" job submit -n 12 -t 1m -- sleep 2)
    wait_state "$id" completed failed
    starts=()
    for conf in "$C1" "$C2"; do
        # The newest of that name: Slurm keeps ended jobs (of earlier runs too) for MinJobAge.
        starts+=($(SLURM_CONF=$conf squeue --json | jq -r --arg n "bench-$id.0" '[.jobs[] | select(.name == $n)] | max_by(.submit_time) | .start_time // empty'))
    done
    if [ "${#starts[@]}" -eq 2 ]; then
        d=$(( starts[0] - starts[1] )); skews+=("${d#-}")
    fi
done
printf '(b) start skew of a 12-processor job over c1+c2 (s):'; printf ' %s' "${skews[@]}"; echo
echo "    /metrics: max $(metric foresight_coallocation_skew_seconds_max) s, mean $(metric foresight_coallocation_skew_seconds_mean) s"

say "(c) commands per cycle with $QUEUED queued global jobs"
# Fill both clusters for a while so the queued jobs wait, are planned every cycle, and the
# nearest ones are reserved.
"$F" job submit -n 16 -t 3m -- sleep 170 > /dev/null
sleep 3
body=$(jq -n --argjson n "$QUEUED" '{jobs: [range($n) | {procs: 2, walltime: 120, command: ["sleep", "5"]}]}')
curl -s -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' -d "$body" "$URL/api/v1/jobs/batch" > /dev/null
sleep 2
c0=$(metric foresight_slurm_commands_total); y0=$(metric foresight_cycles_total); s0=$(metric foresight_cluster_snapshots_total)
r0=$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/reservations" | jq 'length')
sleep "$WINDOW"
c1=$(metric foresight_slurm_commands_total); y1=$(metric foresight_cycles_total); s1=$(metric foresight_cluster_snapshots_total)
r1=$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/reservations" | jq 'length')
echo "(c) over ${WINDOW}s with $QUEUED jobs queued: $((c1 - c0)) Slurm commands, $((y1 - y0)) cycles, $((s1 - s0)) snapshots, $((r1 - r0)) reservations made"
awk -v c=$((c1 - c0)) -v y=$((y1 - y0)) -v s=$((s1 - s0)) -v r=$((r1 - r0)) \
    'BEGIN { printf "    %.2f commands per cycle; snapshots %d x 4 = %d commands; the rest (%d) for %d reservations\n", (y ? c / y : 0), s, 4 * s, c - 4 * s, r }'
# Cancel the filler and the queue.
for id in $(curl -s -H "Authorization: Bearer $TOKEN" "$URL/api/v1/jobs?limit=100000" | jq -r '.[] | select(.state != "completed" and .state != "failed" and .state != "cancelled") | .id'); do
    curl -s -X POST -H "Authorization: Bearer $TOKEN" "$URL/api/v1/jobs/$id/cancel" > /dev/null || true
done
sleep 3

say "(d) forecast accuracy with the site's jobs competing"
e0_sum=$(metric foresight_estimate_error_seconds)
for i in 1 2 3; do
    runuser -u fsowner -- env SLURM_CONF="$C1" sbatch -J bench-local --chdir="$SLURM_DIR/c1/jobs" \
        -o /dev/null -n 4 -t 1 --wrap "sleep 57" > /dev/null
done
sleep 2
ids=()
for i in $(seq 4); do
    ids+=("$("$F" job submit -n 6 -t 1m --no-coallocation -- sleep 57)")
done
for id in "${ids[@]}"; do wait_state "$id" completed failed cancelled || true; done
errs=()
for id in "${ids[@]}"; do
    j=$(job_json "$id")
    errs+=("$(echo "$j" | jq -r '(.started_at - .first_planned_start) | if . < 0 then -. else . end')")
done
printf '(d) |planned - actual| start of %s global jobs around the site'"'"'s jobs (s):' "${#ids[@]}"; printf ' %s' "${errs[@]}"; echo
echo "    /metrics mean over every started job of this run: $(metric foresight_estimate_error_seconds) s (was $e0_sum before (d))"
