#!/usr/bin/env bash
# The stand-in's `docker-entrypoint.sh cassandra -f`: Cassandra 2.1 in the foreground through
# scripts/cassandra.sh, its data in /var/lib/cassandra, its heap MAX_HEAP_SIZE as the official
# image takes it, the authentication classes from ${CASSANDRA_CONF}/cassandra.yaml.
set -euo pipefail
if [ "${1:-}" != cassandra ]; then
	exec "$@"
fi
export SILT_CASSANDRA_CACHE=/opt/cassandra-standin
export SILT_CASSANDRA_HEAP="${MAX_HEAP_SIZE:-1G}"
export SILT_CASSANDRA_CONFIGURE=/usr/local/lib/cassandra-standin/cassandra-configure.sh
exec bash /usr/local/lib/cassandra-standin/cassandra.sh run /var/lib/cassandra 9042 7000
