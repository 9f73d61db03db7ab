#!/bin/sh
# Creates the Temporal databases in Postgres and brings their schemas up to the version
# the admin-tools image ships (the same version as the temporalio/server image).
# Idempotent: `create` tolerates an existing database, update-schema applies only what
# is missing.
set -eu

: "${POSTGRES_SEEDS:?}" "${POSTGRES_USER:?}" "${SQL_PASSWORD:?}"
DB_PORT="${DB_PORT:-5432}"
SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

echo "Waiting for Postgres at ${POSTGRES_SEEDS}:${DB_PORT}..."
i=0
until nc -z -w 2 "$POSTGRES_SEEDS" "$DB_PORT"; do
  i=$((i + 1))
  [ "$i" -ge 60 ] && { echo "Postgres did not open its port" >&2; exit 1; }
  sleep 1
done

sqltool() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "$DB_PORT" \
    -u "$POSTGRES_USER" --pw "$SQL_PASSWORD" "$@"
}

for db in temporal temporal_visibility; do
  dir=temporal
  [ "$db" = temporal_visibility ] && dir=visibility
  sqltool --db "$db" create || echo "database $db exists"
  sqltool --db "$db" setup-schema -v 0.0 || echo "schema of $db is already set up"
  sqltool --db "$db" update-schema -d "$SCHEMA_DIR/$dir/versioned"
done
echo "Temporal schema is ready"
