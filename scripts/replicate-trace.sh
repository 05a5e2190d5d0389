#!/usr/bin/env bash
# Superimposes K copies of an SWF trace on a machine K times as large: the same load per
# processor, K times the jobs and the queue. Copy k (0-based) is submitted k seconds later and
# its job ids are offset by k times the largest id. Grows a test case for costs that follow
# the queue length, where no larger archive trace is at hand.
#
# usage: scripts/replicate-trace.sh TRACE.swf[.gz] K > OUT.swf
set -euo pipefail
trace=${1:?usage: replicate-trace.sh TRACE K}
k=${2:?usage: replicate-trace.sh TRACE K}
cat_trace() { case "$trace" in *.gz) zcat -- "$trace" ;; *) cat -- "$trace" ;; esac; }
procs=$(cat_trace | sed -n 's/^; *MaxProcs: *\([0-9]*\).*/\1/p' | head -n1)
[ -n "$procs" ] || { echo "replicate-trace: no MaxProcs header in $trace" >&2; exit 1; }
maxid=$(cat_trace | awk '!/^;/ && NF >= 18 && $1 > m { m = $1 } END { print m + 0 }')
echo "; Replicated ${k}x from $(basename "$trace") by scripts/replicate-trace.sh"
echo "; MaxProcs: $((procs * k))"
echo "; MaxNodes: $((procs * k))"
cat_trace | awk -v k="$k" -v maxid="$maxid" '
  !/^;/ && NF >= 18 {
    for (c = 0; c < k; c++) {
      $1 = $1 + (c > 0 ? maxid : 0); $2 = $2 + (c > 0 ? 1 : 0); $17 = -1; $18 = -1
      print
    }
  }' | sort -s -n -k2,2
