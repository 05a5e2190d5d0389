#!/usr/bin/env bash
# Whole-trace timings of `foresight sim run` against the Parallel Workloads Archive traces.
#
# Builds the release binary, then for every reference trace found and every policy runs
#   target/release/foresight sim run --trace T --policy P --semantics pyss -o json
# BENCH_RUNS times (default 5), timing the whole process (start-up, reading and
# decompressing the trace, simulating, printing) with bash's own clock, and prints one row
# per (trace, policy): the simulation's figures and the best and median wall seconds.
#
# Usage: scripts/bench-traces.sh [--json] [--quick]
#   --json    one JSON object per row on stdout instead of the table
#   --quick   skip conservative and fcfs on HPC2N (the largest trace)
# Environment:
#   FORESIGHT_TRACES  directory of the traces (default ../shared/traces beside the checkout)
#   BENCH_RUNS        runs per row (default 5)
#   CARGO_TARGET_DIR  honoured when locating the binary
# Build output and notes go to stderr, so stdout holds only the table or the JSON lines.
# Exit status: 0 when every row ran, 1 when a run failed or no trace was found.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

json=0
quick=0
for arg in "$@"; do
  case "$arg" in
    --json) json=1 ;;
    --quick) quick=1 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "bench-traces: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

runs=${BENCH_RUNS:-5}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
  echo "bench-traces: BENCH_RUNS must be a positive integer, got '$runs'" >&2
  exit 2
fi

# A FORESIGHT_TRACES given relative is relative to where the script was started; the default
# is relative to the checkout, like the tests.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n ${FORESIGHT_TRACES:-} ]]; then
  traces=$(cd "$FORESIGHT_TRACES" 2>/dev/null && pwd) || {
    echo "bench-traces: FORESIGHT_TRACES=$FORESIGHT_TRACES is not a directory" >&2
    exit 1
  }
else
  traces=$root/../shared/traces
fi
cd "$root"

trace_files=(
  KTH-SP2-1996-2.1-cln.swf.gz
  SDSC-SP2-1998-4.2-cln.swf.gz
  CTC-SP2-1996-3.1-cln.swf.gz
  HPC2N-2002-2.2-cln.swf.gz
)
policies=(easy conservative fcfs)

echo "bench-traces: cargo build --release -p foresight-cli" >&2
cargo build --release -p foresight-cli >&2
target_dir=${CARGO_TARGET_DIR:-target}
[[ $target_dir = /* ]] || target_dir=$root/$target_dir
bin=$target_dir/release/foresight
[[ -x $bin ]] || { echo "bench-traces: no binary at $bin" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-traces.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Microseconds since the epoch: bash 5's $EPOCHREALTIME needs no extra process; older bash
# falls back to GNU date. Non-digits are dropped (the separator is locale-dependent).
if [[ -n ${EPOCHREALTIME:-} ]]; then
  now_us() { local t=${EPOCHREALTIME//[!0-9]/}; echo "$t"; }
else
  now_us() { local t; t=$(date +%s%N); echo "${t%???}"; }
fi

# Prints "jobs mean_wait mean_bsld utilization" from the CLI's JSON: python3 when present
# (exact, top-level keys only), else the top-level keys of the pretty-printed object
# (indented by two spaces) with sed.
if command -v python3 >/dev/null 2>&1; then
  figures() {
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(*(json.dumps(d[k]) for k in ("jobs", "mean_wait", "mean_bsld", "utilization")))
' "$1"
  }
else
  figures() {
    local k out=()
    for k in jobs mean_wait mean_bsld utilization; do
      out+=("$(sed -n "s/^  \"$k\": *\\([^,]*\\),\\{0,1\\}\$/\\1/p" "$1")")
    done
    echo "${out[*]}"
  }
fi

# Everything but the timings, to check that repeated runs agree.
strip_timings() { grep -v -e '"elapsed_seconds"' -e '"read_seconds"' "$1"; }

if ((json == 0)); then
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ)  $(git rev-parse --short HEAD 2>/dev/null || echo '?')  $(uname -m)  $(nproc 2>/dev/null || echo '?') cpus  best and median of $runs runs, semantics pyss"
  fmt='%-28s %-13s %7s %12s %10s %6s %9s %9s\n'
  # shellcheck disable=SC2059
  printf "$fmt" trace policy jobs "mean wait s" "mean bsld" util "best s" "median s"
fi

found=0
failed=0
for trace in "${trace_files[@]}"; do
  path=$traces/$trace
  if [[ ! -f $path ]]; then
    echo "bench-traces: $path not found, skipped" >&2
    continue
  fi
  found=$((found + 1))
  for policy in "${policies[@]}"; do
    if ((quick)) && [[ $trace == HPC2N-* && $policy != easy ]]; then
      continue
    fi
    times=()
    ok=1
    for ((r = 1; r <= runs; r++)); do
      out=$tmp/run$r.json
      start=$(now_us)
      if ! "$bin" sim run --trace "$path" --policy "$policy" --semantics pyss -o json \
        >"$out" 2>"$tmp/stderr"; then
        echo "bench-traces: $trace $policy failed:" >&2
        cat "$tmp/stderr" >&2
        ok=0
        break
      fi
      end=$(now_us)
      times+=($((end - start)))
      if ((r > 1)) && ! diff -q <(strip_timings "$tmp/run1.json") <(strip_timings "$out") >/dev/null; then
        echo "bench-traces: warning: $trace $policy run $r gave other figures than run 1" >&2
      fi
    done
    if ((!ok)); then
      failed=$((failed + 1))
      continue
    fi
    read -r jobs mwait bsld util <<<"$(figures "$tmp/run1.json")"
    # best and median, in seconds (the median of an even count is the mean of the middle two)
    read -r best median all <<<"$(printf '%s\n' "${times[@]}" | sort -n | awk '
      { t[NR] = $1 / 1e6; s = s (NR > 1 ? "," : "") sprintf("%.4f", $1 / 1e6) }
      END {
        m = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
        printf "%.4f %.4f %s\n", t[1], m, s
      }')"
    if ((json)); then
      printf '{"trace":"%s","policy":"%s","semantics":"pyss","jobs":%s,"mean_wait":%s,"mean_bsld":%s,"utilization":%s,"runs":%d,"best_seconds":%s,"median_seconds":%s,"sorted_seconds":[%s]}\n' \
        "$trace" "$policy" "$jobs" "$mwait" "$bsld" "$util" "$runs" "$best" "$median" "$all"
    else
      # shellcheck disable=SC2059
      printf "$fmt" "${trace%.swf.gz}" "$policy" "$jobs" \
        "$(awk -v x="$mwait" 'BEGIN { printf "%.1f", x }')" \
        "$(awk -v x="$bsld" 'BEGIN { printf "%.2f", x }')" \
        "$(awk -v x="$util" 'BEGIN { printf "%.3f", x }')" \
        "$best" "$median"
    fi
  done
done

if ((found == 0)); then
  echo "bench-traces: no trace found in $traces (set FORESIGHT_TRACES)" >&2
  exit 1
fi
((failed == 0)) || exit 1
