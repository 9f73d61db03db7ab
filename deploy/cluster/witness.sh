#!/usr/bin/env bash
# The multi-instance witness on PostgreSQL: stands the cluster up with
# deploy/cluster/up.sh (PostgreSQL, the Temporal schema, a Temporal server, 2 `wop worker`
# and 2 `wop api` processes serving the bench pack with the scripted mock) and runs
# `wop bench --only multi-instance` on it: conversations driven through both APIs, the
# worker process holding them killed with SIGKILL (20 times by default), every turn sent
# at a kill resumed by the other worker, and every accepted turn found exactly once in
# its transcript. It exits non-zero on any failure (a lost or duplicated turn, a turn
# resumed by the killed worker, a worker that does not come back), keeping the logs.
#
#   deploy/cluster/witness.sh [OUT]     # OUT (optional) receives the bench's output
#
# WOP_WITNESS_KILLS sets the number of kills; WOP_WITNESS_KILL_DELAY (a duration, 200ms)
# sends the turns that long after each kill instead of at once (`wop bench --kill-delay`);
# WOP_WITNESS_KILL_IN_TURN (a duration, 200ms) sends them first and kills the worker that
# long after, while they run on it (`wop bench --kill-in-turn`; the workers' scripted mock
# then holds each round WOP_MOCK_ROUND_DELAY, 1s unless set); the other settings are up.sh's.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-}"
KILLS="${WOP_WITNESS_KILLS:-20}"
KILL_DELAY="${WOP_WITNESS_KILL_DELAY:-0s}"
KILL_IN_TURN="${WOP_WITNESS_KILL_IN_TURN:-0s}"
if [[ "$KILL_IN_TURN" != 0s && "$KILL_IN_TURN" != 0 ]]; then
  # A round must still run when the kill lands; the workers inherit this.
  export WOP_MOCK_ROUND_DELAY="${WOP_MOCK_ROUND_DELAY:-1s}"
fi

WORK="$(mktemp -d /tmp/wop-witness.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
# The workers serve the bench pack only (bench/testdata/packs/bench-echo.*).
mkdir -p "$WORK/packs"
cp "$ROOT"/bench/testdata/packs/bench-echo.* "$WORK/packs/"
chmod -R a+rX "$WORK"

cmd=(sh -c 'exec "$WOP_BIN" bench --address "$TEMPORAL_ADDRESS" --namespace "$TEMPORAL_NAMESPACE" \
  --only multi-instance --kills "$0" --kill-delay "$1" --kill-in-turn "$2" --cpu-process temporal="$WOP_CLUSTER_TEMPORAL_PID" \
  --cpu-process postgres="$WOP_CLUSTER_POSTGRES_PID"' "$KILLS" "$KILL_DELAY" "$KILL_IN_TURN")
if [[ -z "${WOP_BIN:-}" ]]; then
  echo "[witness] building wop"
  (cd "$ROOT" && go build -o "$WORK/wop" ./cmd/wop)
  export WOP_BIN="$WORK/wop"
fi
export WOP_PACKS="$WORK/packs" WOP_MODEL_PROVIDER=mock TEMPORAL_NAMESPACE="${TEMPORAL_NAMESPACE:-wop-witness}"

# The bench's exit status is the script's: under pipefail the pipeline through tee
# fails with up.sh's status (which is the bench's). PIPESTATUS is no help after
# `|| rc=$?`: it then holds the assignment's own 0.
rc=0
if [[ -n "$OUT" ]]; then
  "$ROOT/deploy/cluster/up.sh" "${cmd[@]}" 2>&1 | tee "$OUT" || rc=$?
else
  "$ROOT/deploy/cluster/up.sh" "${cmd[@]}" || rc=$?
fi
if [[ $rc != 0 ]]; then
  echo "[witness] FAILED (status $rc)" >&2
  exit "$rc"
fi
echo "[witness] passed"
