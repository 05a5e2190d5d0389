#!/usr/bin/env bash
# Conservative, EASY and EASY with shortest-first backfill on the same traces, two builds
# side by side: wall seconds and peak memory of each run (`/usr/bin/time`), the simulation's
# own seconds, and the schedule digest, which must agree between the builds.
#
# usage: scripts/bench-policies.sh BEFORE_BIN AFTER_BIN TRACE[@PROCS]...
#   BIN: a build of `cargo build --release -p foresight-sim --example policy_cost`
#   (target/release/examples/policy_cost); build the base revision in its own worktree.
# Environment: POLICIES (default "easy conservative spf"), TIMEOUT seconds per run (600).
set -euo pipefail
before=${1:?usage: bench-policies.sh BEFORE_BIN AFTER_BIN TRACE...}
after=${2:?usage: bench-policies.sh BEFORE_BIN AFTER_BIN TRACE...}
shift 2
policies=${POLICIES:-easy conservative spf}
limit=${TIMEOUT:-600}
printf 'trace\tpolicy\tbuild\twall_s\tpeak_MiB\tsim_s\tdigest\n'
for trace in "$@"; do
  for policy in $policies; do
    for build in before after; do
      bin=$before
      [[ $build == after ]] && bin=$after
      out=$(mktemp)
      if /usr/bin/time -f '%e %M' -o "$out.time" timeout "$limit" \
        "$bin" --policies "$policy" "$trace" >"$out"; then
        read -r wall kb <"$out.time"
        IFS=$'\t' read -r name _ _ sim _ digest <"$out"
        printf '%s\t%s\t%s\t%s\t%d\t%s\t%s\n' "$name" "$policy" "$build" "$wall" \
          $((kb / 1024)) "$sim" "$digest"
      else
        printf '%s\t%s\t%s\t>%s\t-\t-\ttimed out\n' "$(basename "$trace")" "$policy" \
          "$build" "$limit"
      fi
      rm -f "$out" "$out.time"
    done
  done
done
