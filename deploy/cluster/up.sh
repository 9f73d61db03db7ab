#!/usr/bin/env bash
# Stands the production topology up on this machine from a plain checkout, without
# Docker: a private PostgreSQL, the Temporal schema on it by deploy/temporal-schema.sh
# (temporal-sql-tool, as the compose file does), a Temporal server on it with the
# compose file's dynamic config, `wop setup`, then 2 `wop worker` and 2 `wop api`
# processes on that one server, each with its own port and Temporal identity. A worker
# that dies is started again (as compose's `restart: on-failure` does). Everything stops
# and its folder is removed when the script exits; on a failure the logs are kept.
#
#   deploy/cluster/up.sh                 # stands it up and waits for Ctrl-C
#   deploy/cluster/up.sh CMD [ARGS...]   # stands it up, runs CMD, tears down, exits with CMD's status
#
# CMD sees the cluster in its environment (also written to $WOP_CLUSTER_DIR/cluster.env):
# TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, WOP_CLUSTER_APIS (the two API base URLs,
# comma-separated), WOP_API_KEY, WOP_CLUSTER_TEMPORAL_PID, WOP_CLUSTER_POSTGRES_PID and
# WOP_CLUSTER_WORKER_PIDFILES.
#
# Needs Go (the wop binary, the Temporal server and temporal-sql-tool are built from
# the checkout's go.mod: the embedded server's build cache serves them) and
# PostgreSQL's server binaries (initdb, pg_ctl, postgres; installed with apt-get as
# Debian's `postgresql` when missing and running as root). As root, PostgreSQL runs as
# the `postgres` user.
#
# Settings (environment): WOP_CLUSTER_DIR (default a new temporary folder),
# WOP_CLUSTER_PORT (first of the ports it uses, default 17300: PostgreSQL on it, the
# Temporal frontend on +1, the APIs on +21 and +22, the workers' health on +31 and +32),
# TEMPORAL_NAMESPACE (default wop), WOP_PACKS (default the checkout's packs),
# WOP_MODEL_PROVIDER (default mock), WOP_API_KEY and WOP_TOKEN_SECRET (default random),
# WOP_BIN, TEMPORAL_SERVER_BIN, TEMPORAL_SQL_TOOL_BIN (prebuilt binaries to use).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PORT="${WOP_CLUSTER_PORT:-17300}"
PG_PORT=$PORT
FRONTEND_PORT=$((PORT + 1))
API_PORTS=($((PORT + 21)) $((PORT + 22)))
HEALTH_PORTS=($((PORT + 31)) $((PORT + 32)))
NAMESPACE="${TEMPORAL_NAMESPACE:-wop}"
PACKS="${WOP_PACKS:-$ROOT/packs}"
DB_PASSWORD=temporal

say() { printf '[cluster %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { say "FAILED: $*" >&2; exit 1; }
random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

if [[ -n "${WOP_CLUSTER_DIR:-}" ]]; then
  DIR="$WOP_CLUSTER_DIR"
  mkdir -p "$DIR"
  own_dir=0
else
  DIR="$(mktemp -d /tmp/wop-cluster.XXXXXX)"
  own_dir=1
fi
DIR="$(cd "$DIR" && pwd)"
LOGS="$DIR/logs"
mkdir -p "$LOGS" "$DIR/bin"
# PostgreSQL runs as another user when this is root: it must reach its data folder.
chmod 755 "$DIR"

# --- teardown -------------------------------------------------------------------------
pids=()        # processes to stop, in the order started
supervisors=() # the workers' restart loops
pg_started=0
status=0
teardown() {
  status=${status:-$?}
  set +e
  touch "$DIR/stopping"
  for s in "${supervisors[@]}"; do kill "$s" 2>/dev/null; done
  for f in "$DIR"/worker-*.pid; do [[ -f "$f" ]] && kill "$(cat "$f")" 2>/dev/null; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  # Give them the API's and the worker's shutdown time, then make sure.
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}" "${supervisors[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    for f in "$DIR"/worker-*.pid; do [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.2
  done
  for p in "${pids[@]}" "${supervisors[@]}"; do kill -9 "$p" 2>/dev/null; done
  for f in "$DIR"/worker-*.pid; do [[ -f "$f" ]] && kill -9 "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null
  if [[ $pg_started == 1 ]]; then
    as_pg "$PG_BIN/pg_ctl" -D "$DIR/pg" -m immediate -w stop >/dev/null 2>&1
  fi
  if [[ $status != 0 ]]; then
    say "stopped after a failure; logs kept in $LOGS" >&2
    for f in "$LOGS"/*.log; do
      [[ -s "$f" ]] || continue
      echo "--- last lines of $f" >&2
      tail -n 15 "$f" >&2
    done
  elif [[ $own_dir == 1 && -z "${WOP_CLUSTER_KEEP:-}" ]]; then
    rm -rf "$DIR"
  else
    say "stopped; its folder is $DIR"
  fi
  exit "$status"
}
trap 'status=$?; teardown' EXIT
trap 'status=130; exit 130' INT
trap 'status=143; exit 143' TERM

# --- binaries -------------------------------------------------------------------------
# The Temporal server and temporal-sql-tool at go.mod's version, built against the
# checkout's module graph (so the packages the embedded server already compiled are
# reused) through a scratch copy of go.mod: the commands need a few modules of their
# own (urfave/cli) that the host's go.mod does not list.
build_server_tools() {
  local mod="$DIR/mod"
  mkdir -p "$mod"
  cp "$ROOT/go.mod" "$mod/go.mod"
  cp "$ROOT/go.sum" "$mod/go.sum"
  local v
  v="$(cd "$ROOT" && go list -m -f '{{.Version}}' go.temporal.io/server)"
  (cd "$ROOT" && go get -modfile="$mod/go.mod" "go.temporal.io/server/cmd/server@$v" "go.temporal.io/server/cmd/tools/sql@$v") \
    >"$LOGS/build.log" 2>&1 || die "resolve the Temporal server's commands at $v (see $LOGS/build.log)"
  if [[ -z "${TEMPORAL_SERVER_BIN:-}" ]]; then
    say "building the Temporal server $v"
    (cd "$ROOT" && go build -modfile="$mod/go.mod" -o "$DIR/bin/temporal-server" go.temporal.io/server/cmd/server) \
      >>"$LOGS/build.log" 2>&1 || die "build the Temporal server (see $LOGS/build.log)"
    TEMPORAL_SERVER_BIN="$DIR/bin/temporal-server"
  fi
  if [[ -z "${TEMPORAL_SQL_TOOL_BIN:-}" ]]; then
    (cd "$ROOT" && go build -modfile="$mod/go.mod" -o "$DIR/bin/temporal-sql-tool" go.temporal.io/server/cmd/tools/sql) \
      >>"$LOGS/build.log" 2>&1 || die "build temporal-sql-tool (see $LOGS/build.log)"
    TEMPORAL_SQL_TOOL_BIN="$DIR/bin/temporal-sql-tool"
  fi
}

command -v go >/dev/null 2>&1 || die "go is not on the PATH"
if [[ -z "${WOP_BIN:-}" ]]; then
  say "building wop"
  (cd "$ROOT" && go build -o "$DIR/bin/wop" ./cmd/wop) >"$LOGS/build-wop.log" 2>&1 ||
    die "build wop (see $LOGS/build-wop.log)"
  WOP_BIN="$DIR/bin/wop"
fi
if [[ -z "${TEMPORAL_SERVER_BIN:-}" || -z "${TEMPORAL_SQL_TOOL_BIN:-}" ]]; then
  build_server_tools
fi
# temporal-schema.sh takes temporal-sql-tool from the PATH.
if [[ "$(basename "$TEMPORAL_SQL_TOOL_BIN")" != temporal-sql-tool ]]; then
  ln -sf "$TEMPORAL_SQL_TOOL_BIN" "$DIR/bin/temporal-sql-tool"
fi
export PATH="$(dirname "$TEMPORAL_SQL_TOOL_BIN"):$DIR/bin:$PATH"

# --- PostgreSQL -----------------------------------------------------------------------
find_pg_bin() {
  local d
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && { echo "$d"; return; }
  done
}
PG_BIN="$(find_pg_bin)"
if [[ -z "$PG_BIN" ]]; then
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 ||
    die "PostgreSQL's server binaries (initdb, pg_ctl) are missing: install Debian's postgresql"
  say "installing Debian's postgresql"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq postgresql; } >"$LOGS/apt.log" 2>&1 ||
    die "apt-get install postgresql (see $LOGS/apt.log)"
  PG_BIN="$(find_pg_bin)"
  [[ -n "$PG_BIN" ]] || die "no initdb after installing postgresql"
fi
if [[ $(id -u) == 0 ]]; then
  id postgres >/dev/null 2>&1 || die "running as root, PostgreSQL needs the postgres user (Debian's postgresql package creates it)"
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi

say "PostgreSQL ($PG_BIN) on 127.0.0.1:$PG_PORT"
mkdir -p "$DIR/pg"
printf '%s\n' "$DB_PASSWORD" >"$DIR/pg.pw"
if [[ $(id -u) == 0 ]]; then chown postgres "$DIR/pg" "$DIR/pg.pw" "$LOGS"; fi
chmod 700 "$DIR/pg"
as_pg "$PG_BIN/initdb" -D "$DIR/pg" -U temporal --pwfile="$DIR/pg.pw" --auth=scram-sha-256 \
  -E UTF8 --no-locale >"$LOGS/initdb.log" 2>&1 || die "initdb (see $LOGS/initdb.log)"
as_pg "$PG_BIN/pg_ctl" -D "$DIR/pg" -l "$LOGS/postgres.log" -w -t 60 \
  -o "-h 127.0.0.1 -p $PG_PORT -k $DIR/pg -c max_connections=200 -c fsync=on" start >/dev/null ||
  die "start PostgreSQL (see $LOGS/postgres.log)"
pg_started=1
PG_PID="$(head -n1 "$DIR/pg/postmaster.pid")"

# --- schema, server, namespace --------------------------------------------------------
say "Temporal schema (deploy/temporal-schema.sh)"
POSTGRES_SEEDS=127.0.0.1 DB_PORT=$PG_PORT POSTGRES_USER=temporal SQL_PASSWORD=$DB_PASSWORD \
  "$ROOT/deploy/temporal-schema.sh" >"$LOGS/schema.log" 2>&1 || die "the Temporal schema (see $LOGS/schema.log)"

cat >"$DIR/temporal.yaml" <<EOF
log:
  stdout: true
  level: warn
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: 4
  datastores:
    default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "127.0.0.1:$PG_PORT"
        connectProtocol: tcp
        user: temporal
        password: "$DB_PASSWORD"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "127.0.0.1:$PG_PORT"
        connectProtocol: tcp
        user: temporal
        password: "$DB_PASSWORD"
        maxConns: 4
        maxIdleConns: 4
        maxConnLifetime: 1h
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
services:
  frontend:
    rpc: {grpcPort: $FRONTEND_PORT, membershipPort: $((PORT + 11)), bindOnLocalHost: true, httpPort: $((PORT + 2))}
  history:
    rpc: {grpcPort: $((PORT + 3)), membershipPort: $((PORT + 13)), bindOnLocalHost: true}
  matching:
    rpc: {grpcPort: $((PORT + 4)), membershipPort: $((PORT + 14)), bindOnLocalHost: true}
  worker:
    rpc: {grpcPort: $((PORT + 5)), membershipPort: $((PORT + 15)), bindOnLocalHost: true}
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:$FRONTEND_PORT"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: "$ROOT/deploy/dynamicconfig/wop.yaml"
  pollInterval: 10s
EOF
say "Temporal server on 127.0.0.1:$FRONTEND_PORT"
"$TEMPORAL_SERVER_BIN" --config-file "$DIR/temporal.yaml" --allow-no-auth start >"$LOGS/temporal.log" 2>&1 &
TEMPORAL_PID=$!
pids+=("$TEMPORAL_PID")

export TEMPORAL_ADDRESS="127.0.0.1:$FRONTEND_PORT" TEMPORAL_NAMESPACE="$NAMESPACE"
"$WOP_BIN" setup --wait 2m >"$LOGS/setup.log" 2>&1 || die "wop setup (see $LOGS/setup.log and $LOGS/temporal.log)"
kill -0 "$TEMPORAL_PID" 2>/dev/null || die "the Temporal server exited (see $LOGS/temporal.log)"

# --- the host: 2 workers, 2 APIs ------------------------------------------------------
export WOP_PACKS="$PACKS" WOP_MODEL_PROVIDER="${WOP_MODEL_PROVIDER:-mock}" WOP_LOG_LEVEL="${WOP_LOG_LEVEL:-warn}"
export WOP_API_KEY="${WOP_API_KEY:-$(random_hex 24)}" WOP_TOKEN_SECRET="${WOP_TOKEN_SECRET:-$(random_hex 32)}"

# worker_loop N: runs `wop worker` N and starts it again whenever it exits, until the
# script stops; the current process's PID is in worker-N.pid.
worker_loop() {
  local n=$1 runs=0
  while [[ ! -e "$DIR/stopping" ]]; do
    runs=$((runs + 1))
    WOP_WORKER_HEALTH_ADDR="127.0.0.1:${HEALTH_PORTS[n - 1]}" "$WOP_BIN" worker >>"$LOGS/worker-$n.log" 2>&1 &
    echo $! >"$DIR/worker-$n.pid.tmp" && mv "$DIR/worker-$n.pid.tmp" "$DIR/worker-$n.pid"
    local rc=0
    wait $! || rc=$?
    [[ -e "$DIR/stopping" ]] && break
    echo "[cluster $(date -u +%H:%M:%S.%N | cut -c1-12)] worker $n (run $runs) exited with status $rc; starting it again" >>"$LOGS/worker-$n.log"
    sleep 0.1
  done
}
for n in 1 2; do
  worker_loop "$n" 2>>"$LOGS/worker-$n.log" &
  supervisors+=($!)
done
for n in 1 2; do
  WOP_HTTP="127.0.0.1:${API_PORTS[n - 1]}" WOP_PUBLIC_URL="http://127.0.0.1:${API_PORTS[n - 1]}" \
    "$WOP_BIN" api >"$LOGS/api-$n.log" 2>&1 &
  pids+=($!)
done

wait_healthy() { # NAME URL
  for _ in $(seq 600); do
    "$WOP_BIN" healthcheck "$2" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "$1 is not healthy at $2 after 60 s (see $LOGS)"
}
for n in 1 2; do
  wait_healthy "worker $n" "http://127.0.0.1:${HEALTH_PORTS[n - 1]}/healthz"
  wait_healthy "api $n" "http://127.0.0.1:${API_PORTS[n - 1]}/healthz"
done

export WOP_CLUSTER_APIS="http://127.0.0.1:${API_PORTS[0]},http://127.0.0.1:${API_PORTS[1]}"
export WOP_CLUSTER_TEMPORAL_PID=$TEMPORAL_PID WOP_CLUSTER_POSTGRES_PID=$PG_PID
export WOP_CLUSTER_WORKER_PIDFILES="$DIR/worker-1.pid,$DIR/worker-2.pid"
(
  umask 077
  for v in TEMPORAL_ADDRESS TEMPORAL_NAMESPACE WOP_CLUSTER_APIS WOP_API_KEY WOP_CLUSTER_TEMPORAL_PID \
    WOP_CLUSTER_POSTGRES_PID WOP_CLUSTER_WORKER_PIDFILES; do
    printf '%s=%s\n' "$v" "${!v}"
  done >"$DIR/cluster.env"
)
say "ready: Temporal $TEMPORAL_ADDRESS (namespace $NAMESPACE) on PostgreSQL 127.0.0.1:$PG_PORT;" \
  "workers $(cat "$DIR/worker-1.pid") and $(cat "$DIR/worker-2.pid"); APIs $WOP_CLUSTER_APIS" \
  "(the key is in $DIR/cluster.env)"

if [[ $# -gt 0 ]]; then
  rc=0
  "$@" || rc=$?
  status=$rc
  exit "$rc"
fi
say "Ctrl-C stops it"
while kill -0 "$TEMPORAL_PID" 2>/dev/null; do sleep 1; done
die "the Temporal server exited (see $LOGS/temporal.log)"
