#!/usr/bin/env bash
# Paired A/B of two svc builds under model-paced streams: each round runs `bench:streams` twice at the same
# time, once against BASE_BIN and once against this checkout's build, both svc processes on core 1. The host's
# speed drifts by a fifth within minutes here, more than most changes move CPU per frame; side by side, the
# drift moves both alike, and each process's CPU per frame is still its own (/proc/PID/stat).
#
#   bench/ab-streams.sh /tmp/base/apps/server/dist/bin.js 3 --targets svc-full --streams 500 --duration 25
#
# One svc target (--targets svc-full, svc-plain, svc-webhook or svc-grounding); the other arguments go to both
# benches as they are (so --streams is per build). Prints one table row per build and round; each run's JSON and
# log are in $TMPDIR/ab-streams-{base,new}-R.{json,log}.
set -euo pipefail
usage='usage: bench/ab-streams.sh BASE_BIN ROUNDS --targets svc-… [bench:streams arguments]'
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
base_bin=$(realpath "$1")
rounds=$2
shift 2
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer. $usage" >&2; exit 2; }
[ -f "$base_bin" ] || { echo "no such file: $base_bin" >&2; exit 2; }
targets=$(printf '%s\n' "$@" | grep -A1 -x -- '--targets' | tail -n1 || true)
[[ $targets =~ ^svc-[a-z]+$ ]] || { echo "one svc target, e.g. --targets svc-full. $usage" >&2; exit 2; }
cd "$(dirname "$0")/.."
out=${TMPDIR:-/tmp}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT INT TERM
for round in $(seq 1 "$rounds"); do
  SVC_BENCH_BIN=$base_bin node bench/streams.mjs "$@" --out "$out/ab-streams-base-$round.json" > "$out/ab-streams-base-$round.log" 2>&1 &
  pids=($!)
  node bench/streams.mjs "$@" --out "$out/ab-streams-new-$round.json" > "$out/ab-streams-new-$round.log" 2>&1 &
  pids+=($!)
  failed=0
  wait "${pids[0]}" || failed=1
  wait "${pids[1]}" || failed=1
  pids=()
  for build in base new; do
    log="$out/ab-streams-$build-$round.log"
    grep -E '^\| svc' "$log" | sed "s/^/$build $round /" || { echo "$build $round: no result; the end of $log:" >&2; tail -n 5 "$log" >&2; }
  done
  [ "$failed" = 0 ] || { echo "round $round: a bench failed (logs above)" >&2; exit 1; }
done
