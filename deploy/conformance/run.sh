#!/usr/bin/env bash
# Runs the public OpenWOP conformance suite (../shared/openwop-conformance, reconstructed
# verbatim from openwop/openwop; run from a copy, never copied into this project) against
# `wop dev` built from this checkout: the v1 lane and the v2 lane, each with its RFC 0148
# ledger, then a certification bundle v3 per lane, signed with the host's key and verified
# against the key its discovery publishes.
#
# Usage: deploy/conformance/run.sh [OUT]   (OUT: where reports, ledgers and bundles go)
# Env:   OPENWOP_SUITE  the suite folder (default ../shared/openwop-conformance)
#        WOP_CONF_PORT  base port (default 18080: API; +220 Temporal, +320 UI)
#
# The host runs as the suite's RUN.md describes: a main key with every scope and
# approvals:delegate (the quorum legs vote for named voters), a low-scope key and a
# second tenant's key in a keys file, webhooks allowed on loopback (the suite's
# receivers listen there), five delivery attempts (the retry policy discovery then
# advertises, so the dead-letter legs can see a delivery exhaust). An open egress
# guard is a relaxation: the host declares it in discovery (extensions["wop.host"].
# relaxations), and the suite and the bundles get it as OPENWOP_HOST_RELAXATIONS.
#
# It prints each lane's counts (files, tests, pass, fail, skip) and the profiles each
# bundle certifies, and exits non-zero when a test fails outside the list of failures
# the reconstruction itself causes (deploy/conformance/known-failures.txt, each with its
# reason), or when a bundle does not verify.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
suite_src=${OPENWOP_SUITE:-$repo/../shared/openwop-conformance}
out=$(mkdir -p "${1:-$(mktemp -d)}" && cd "${1:-.}" && pwd)
port=${WOP_CONF_PORT:-18080}
work=$(mktemp -d)
host_pid=
cleanup() {
  if [[ -n "$host_pid" ]]; then kill "$host_pid" 2>/dev/null || true; wait "$host_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

[[ -d "$suite_src/conformance" ]] || { echo "no conformance suite at $suite_src (set OPENWOP_SUITE)"; exit 1; }
suite_src=$(cd "$suite_src" && pwd)
echo "suite: $suite_src; results in $out"
cp -r "$suite_src" "$work/owsuite"
suite="$work/owsuite/conformance"
(cd "$suite" && npm install --no-audit --no-fund --loglevel=error >/dev/null && npm install --no-save --no-audit --no-fund --loglevel=error tsx >/dev/null)

# The v2 lane reads schemas/v2 and the codemap from a layout root built from the spec copies.
root="$work/v2root"
mkdir -p "$root/schemas/v2" "$root/spec/v2" "$root/spec/v1"
spec="$suite_src/../spec"
cp "$spec"/schemas/v2/*.schema.json "$root/schemas/v2/" 2>/dev/null || true
for f in configurable webhook-delivery certification-bundle; do cp "$spec/v2/schemas/$f.schema.json" "$root/schemas/v2/"; done
cp "$spec"/v2/schemas/sdks/*.schema.json "$root/schemas/v2/"
cp "$spec/v2/event-codemap.json" "$spec/v2/profiles.json" "$root/spec/v2/"

(cd "$repo" && go build -o "$work/wop" ./cmd/wop)
wop="$work/wop"
data="$work/data"
mkdir -p "$data"
keys="$work/keys.yaml"
touch "$keys"
"$wop" keys add conformance-low --tenant default --scopes runs:read,runs:create,runs:cancel --file "$keys" >"$work/low.key"
"$wop" keys add tenant-b --tenant tenant-b --scopes all --file "$keys" >"$work/tenantb.key"
main_key="conf-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"

base="http://127.0.0.1:$port"
WOP_API_KEY=$main_key WOP_API_KEY_SCOPES=all,approvals:delegate WOP_KEYS_FILE=$keys \
  WOP_WEBHOOK_ALLOW_PRIVATE=true WOP_WEBHOOK_MAX_ATTEMPTS=5 WOP_LOG_LEVEL=warn WOP_TEMPORAL_LOG_LEVEL=error \
  "$wop" dev --conformance-seams --data "$data" --http "127.0.0.1:$port" --temporal-port $((port + 220)) --ui-port $((port + 320)) \
  --packs "$repo/packs" >"$out/host.log" 2>&1 &
host_pid=$!
for _ in $(seq 1 120); do
  curl -fs -m 2 "$base/.well-known/openwop" >/dev/null 2>&1 && break
  kill -0 "$host_pid" 2>/dev/null || { echo "wop dev exited:"; tail -20 "$out/host.log"; exit 1; }
  sleep 1
done
curl -fs -m 2 "$base/.well-known/openwop" >/dev/null || { echo "wop dev did not answer in 120 s"; tail -20 "$out/host.log"; exit 1; }
relaxations=$(curl -fs -m 5 -H 'OpenWOP-Version: 2' "$base/.well-known/openwop" |
  python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["extensions"]["wop.host"].get("relaxations", [])))')
if [[ $relaxations != "[]" ]]; then
  export OPENWOP_HOST_RELAXATIONS=$relaxations
  echo "relaxations the host declares: $relaxations"
fi

build=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
status=0
lane() { # lane LABEL MAJOR FILES...
  local label=$1 major=$2; shift 2
  local ledger="$out/ledger-$label.jsonl" report="$out/report-$label.json"
  rm -f "$ledger"
  local start=$SECONDS rc=0
  (cd "$suite" && env OPENWOP_BASE_URL="$base" OPENWOP_API_KEY="$main_key" \
    OPENWOP_TEST_LOW_SCOPE_KEY="$(cat "$work/low.key")" OPENWOP_TEST_TENANT_B_API_KEY="$(cat "$work/tenantb.key")" \
    OPENWOP_LEDGER_PATH="$ledger" \
    $([[ $major == 2 ]] && echo OPENWOP_TARGET_MAJOR=2 OPENWOP_CONFORMANCE_ROOT="$root") \
    timeout 1500 npx vitest run --no-file-parallelism --reporter=json --outputFile="$report" "$@" >"$out/vitest-$label.log" 2>&1) || rc=$?
  echo "lane $label (major $major): vitest exit $rc in $((SECONDS - start)) s"
  python3 "$repo/deploy/conformance/counts.py" "$report" "$repo/deploy/conformance/known-failures.txt" || status=1
  (cd "$suite" && SUITE_DIR="$suite" OPENWOP_BASE_URL="$base" SPEC_DIR="$spec/v2" HOST_BUILD="$build" \
    npx tsx "$repo/deploy/conformance/bundle.mts" "$report" "$ledger" "$major" "$out/bundle-$label.json") || status=1
  "$wop" certify sign "$out/bundle-$label.json" --key "$data/signing-key.pem" || status=1
  "$wop" certify verify "$out/bundle-$label.json" --base-url "$base" || status=1
}

mapfile -t v1files < <(cd "$suite" && ls src/scenarios/*.test.ts | grep -v '/v2-')
mapfile -t v2files < <(cd "$suite" && ls src/scenarios/v2-*.test.ts)
lane v1 1 "${v1files[@]}"
lane v2 2 "${v2files[@]}" src/scenarios/auth-challenge-no-oracle.test.ts
exit $status
