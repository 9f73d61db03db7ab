#!/bin/sh
# Creates the host's namespace and registers the search attributes its runs keep
# current (workflows/searchattrs.go; tests/compose_test.go checks the two agree).
# Idempotent.
set -eu

NS="${TEMPORAL_NAMESPACE:-default}"
ADDR="${TEMPORAL_ADDRESS:-temporal:7233}"
SEARCH_ATTRIBUTES="WopWorkflowId WopTenant WopStatus WopPackId WopTags:KeywordList WopCreatedAt:Datetime WopApprovers:KeywordList"
# The Keyword attributes of runs created before WopTags (README "Upgrades"): registered
# unless WOP_LEGACY_ATTRIBUTES=false, for a namespace no earlier release ran on.
LEGACY_SEARCH_ATTRIBUTES="WopPackState WopWaitingOn WopWaitingKind WopWaitingTool WopStalledOn"
[ "${WOP_LEGACY_ATTRIBUTES:-true}" = false ] || SEARCH_ATTRIBUTES="$SEARCH_ATTRIBUTES $LEGACY_SEARCH_ATTRIBUTES"

# With mutual TLS (deploy/compose.temporal-mtls.yml) the CLI presents the client
# certificate the worker and the API use.
temporal() {
  if [ -n "${TEMPORAL_TLS_CERT:-}" ]; then
    command temporal "$@" --tls-cert-path "$TEMPORAL_TLS_CERT" --tls-key-path "$TEMPORAL_TLS_KEY" \
      --tls-ca-path "$TEMPORAL_TLS_CA" --tls-server-name "${TEMPORAL_TLS_SERVER_NAME:-temporal}"
  else
    command temporal "$@"
  fi
}

echo "Waiting for Temporal at $ADDR..."
i=0
until temporal operator cluster health --address "$ADDR" >/dev/null 2>&1; do
  i=$((i + 1))
  [ "$i" -ge 60 ] && { echo "Temporal at $ADDR is not healthy" >&2; exit 1; }
  sleep 2
done

if ! temporal operator namespace describe --address "$ADDR" -n "$NS" >/dev/null 2>&1; then
  temporal operator namespace create --address "$ADDR" -n "$NS" --retention 720h
  echo "Created namespace $NS"
fi

# Each entry is NAME or NAME:TYPE (Keyword when no type is given).
existing="$(temporal operator search-attribute list --address "$ADDR" -n "$NS")"
for entry in $SEARCH_ATTRIBUTES; do
  sa="${entry%%:*}"
  type=Keyword
  [ "$sa" != "$entry" ] && type="${entry#*:}"
  if printf '%s\n' "$existing" | grep -qw "$sa"; then
    echo "Search attribute $sa exists"
  else
    temporal operator search-attribute create --address "$ADDR" -n "$NS" --name "$sa" --type "$type"
    echo "Registered search attribute $sa ($type)"
  fi
done
echo "Namespace $NS is ready"
