#!/usr/bin/env bash
# Paired A/B of two svc builds under model-paced streams: each round runs `bench:streams` twice at the same
# time, once against BASE_BIN and once against this checkout's build, both svc processes on core 1. The host's
# speed drifts by a fifth within minutes here, more than most changes move CPU per frame; side by side, the
# drift moves both alike, and each process's CPU per frame is still its own (/proc/PID/stat).
#
#   bench/ab-streams.sh /tmp/base/apps/server/dist/bin.js 3 --targets svc-full --streams 500 --duration 25
#
# Each bench gets the arguments after ROUNDS (so --streams is per build). Prints one table row per build and
# round; the JSON of each run is in $TMPDIR/ab-streams-{base,new}-R.json.
set -euo pipefail
base_bin=${1:?usage: bench/ab-streams.sh BASE_BIN [ROUNDS] [bench:streams arguments]}
rounds=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
cd "$(dirname "$0")/.."
out=${TMPDIR:-/tmp}
for round in $(seq 1 "$rounds"); do
  SVC_BENCH_BIN=$base_bin node bench/streams.mjs "$@" --out "$out/ab-streams-base-$round.json" > "$out/ab-streams-base-$round.log" 2>&1 &
  base=$!
  node bench/streams.mjs "$@" --out "$out/ab-streams-new-$round.json" > "$out/ab-streams-new-$round.log" 2>&1 &
  new=$!
  wait "$base" "$new"
  for build in base new; do grep -E '^\| svc' "$out/ab-streams-$build-$round.log" | sed "s/^/$build $round /"; done
done
