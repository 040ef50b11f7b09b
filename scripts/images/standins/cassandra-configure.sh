#!/usr/bin/env bash
# Run by scripts/cassandra.sh on the file it wrote ($1): serve CQL on the pod's address, not
# loopback only, and take the authentication classes from the image's cassandra.yaml (where the
# manifest's cassandra-enable-auth.sh set them).
set -euo pipefail
yaml="$1"
conf="${CASSANDRA_CONF:-/etc/cassandra}/cassandra.yaml"
address="$(hostname -I | awk '{print $1}')"
sed -ri "s/^rpc_address:.*/rpc_address: 0.0.0.0/" "$yaml"
echo "broadcast_rpc_address: ${address}" >>"$yaml"
for key in authenticator authorizer; do
	line="$(grep -E "^${key}:" "$conf")"
	sed -ri "s/^${key}:.*/${line}/" "$yaml"
done
