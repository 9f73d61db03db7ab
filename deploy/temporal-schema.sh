#!/bin/sh
# Creates the Temporal databases in Postgres and brings their schemas up to the version
# of the Temporal server (the admin-tools image's, or go.mod's go.temporal.io/server).
# Idempotent: `create` and `setup-schema` pass when what they make already exists (any
# other failure stops the script), update-schema applies only what is missing.
#
# Runs in the temporalio/admin-tools image (docker-compose.yml) or from a plain checkout
# with Go installed: without temporal-sql-tool on the PATH it runs the server module's
# tool at go.mod's version (`go run go.temporal.io/server/cmd/tools/sql@v1.32.1`, which
# the Go module proxy serves) and reads the schema files from the module. POSTGRES_SEEDS, POSTGRES_USER and SQL_PASSWORD say where Postgres is;
# SCHEMA_DIR overrides where the schema files are.
set -eu

: "${POSTGRES_SEEDS:?}" "${POSTGRES_USER:?}" "${SQL_PASSWORD:?}"
DB_PORT="${DB_PORT:-5432}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

if command -v temporal-sql-tool >/dev/null 2>&1; then
  SQL_TOOL=temporal-sql-tool
else
  command -v go >/dev/null 2>&1 || { echo "neither temporal-sql-tool nor go is on the PATH" >&2; exit 1; }
  SERVER_VERSION="$(cd "$ROOT" && go list -m -f '{{.Version}}' go.temporal.io/server)"
  SQL_TOOL="go run go.temporal.io/server/cmd/tools/sql@$SERVER_VERSION"
fi
if [ -z "${SCHEMA_DIR:-}" ]; then
  if [ -d /etc/temporal/schema/postgresql/v12 ]; then
    SCHEMA_DIR=/etc/temporal/schema/postgresql/v12
  else
    SCHEMA_DIR="$(cd "$ROOT" && go list -m -f '{{.Dir}}' go.temporal.io/server)/schema/postgresql/v12"
  fi
fi
[ -d "$SCHEMA_DIR/temporal/versioned" ] || { echo "no schema files in $SCHEMA_DIR" >&2; exit 1; }

# nc (admin-tools image) or pg_isready (PostgreSQL's client tools), whichever is there.
port_open() {
  if command -v nc >/dev/null 2>&1; then
    nc -z -w 2 "$POSTGRES_SEEDS" "$DB_PORT"
  elif command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$POSTGRES_SEEDS" -p "$DB_PORT"
  else
    return 0 # nothing to wait with: the first create reports a closed port
  fi
}
echo "Waiting for Postgres at ${POSTGRES_SEEDS}:${DB_PORT}..."
i=0
until port_open; do
  i=$((i + 1))
  [ "$i" -ge 60 ] && { echo "Postgres did not open its port" >&2; exit 1; }
  sleep 1
done

sqltool() {
  (cd "$ROOT" && $SQL_TOOL --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" \
    -u "$POSTGRES_USER" --pw "$SQL_PASSWORD" "$@")
}

# tolerate MESSAGE CMD...: runs the tool; a failure whose output says the thing already
# exists prints MESSAGE and passes, any other failure (a wrong password, a closed port)
# stops the script with the tool's own words.
tolerate() {
  msg=$1
  shift
  if out=$(sqltool "$@" 2>&1); then
    printf '%s\n' "$out"
  elif printf '%s' "$out" | grep -qi 'already exists'; then
    echo "$msg"
  else
    printf '%s\n' "$out" >&2
    echo "temporal-sql-tool $* failed" >&2
    exit 1
  fi
}

for db in temporal temporal_visibility; do
  dir=temporal
  [ "$db" = temporal_visibility ] && dir=visibility
  tolerate "database $db exists" --db "$db" create
  tolerate "schema of $db is already set up" --db "$db" setup-schema -v 0.0
  sqltool --db "$db" update-schema -d "$SCHEMA_DIR/$dir/versioned"
done
echo "Temporal schema is ready"
