#!/usr/bin/env bash
# Turns the cassandra.yaml that scripts/cassandra.sh writes for a single test node into one
# node of a loopback test cluster; run by it as SILT_CASSANDRA_CONFIGURE (`bash THIS FILE.yaml`).
#
# Environment:
#   SILT_CASSANDRA_NODE_ADDRESS  this node's address (listen and native), e.g. 127.0.0.2
#   SILT_CASSANDRA_NODE_TOKEN    its one token (num_tokens stays 1): tokens evenly spaced over
#                                the ring give each node an equal share without vnodes
#   SILT_CASSANDRA_SEEDS         comma-separated seed addresses (default 127.0.0.1)
#   SILT_CASSANDRA_NODE_CONFIGURE  optional: a further script run as `bash SCRIPT FILE.yaml` on the
#                                result (the StatefulSet's, which turns authentication on), so a
#                                cluster node starts with what a single node would be given
#   SILT_CASSANDRA_CLUSTER_TIMEOUTS  stock (default: Cassandra's own server timeouts) or tuned
#
# Every node uses the same native and storage ports on its own address: Cassandra 2.1 dials
# its peers on its own storage_port. auto_bootstrap is off so that all nodes can start at
# once on empty data directories (nothing to stream), and hinted hand-off is on so that a
# restarted node receives the writes it missed.
#
# The dynamic snitch is on, as by default. The server's request timeouts are Cassandra's own
# defaults (read 5 s, range 10 s, write 2 s, counter write 5 s, CAS contention 1 s, other 10 s,
# truncate 60 s): Silt's driver settings must ride out a lost node against a cluster configured
# as its operators left it (docs/design/kv.md, "Faults on a Cassandra cluster").
# SILT_CASSANDRA_CLUSTER_TIMEOUTS=tuned instead keeps the single test node's generous timeouts
# with a 1.5 s read timeout, the setting earlier versions of the manual recommended.
set -euo pipefail
yaml="${1:?usage: cassandra-cluster-node.sh CASSANDRA_YAML}"
address="${SILT_CASSANDRA_NODE_ADDRESS:?}"
token="${SILT_CASSANDRA_NODE_TOKEN:?}"
seeds="${SILT_CASSANDRA_SEEDS:-127.0.0.1}"
[[ "$address" =~ ^[0-9.]+$ && "$token" =~ ^-?[0-9]+$ && "$seeds" =~ ^[0-9.,]+$ ]] || {
	echo "cassandra-cluster-node.sh: bad address, token or seeds" >&2
	exit 1
}
sed -i \
	-e "s/^listen_address:.*/listen_address: $address/" \
	-e "s/^rpc_address:.*/rpc_address: $address/" \
	-e "s/^initial_token:.*/initial_token: $token/" \
	-e "s/^\( *- seeds:\).*/\1 \"$seeds\"/" \
	-e "s/^hinted_handoff_enabled:.*/hinted_handoff_enabled: true/" \
	-e "s/^cluster_name:.*/cluster_name: silt-test-cluster/" \
	-e "s/^dynamic_snitch:.*/dynamic_snitch: true/" \
	"$yaml"
case "${SILT_CASSANDRA_CLUSTER_TIMEOUTS:-stock}" in
stock)
	sed -i \
		-e "s/^read_request_timeout_in_ms:.*/read_request_timeout_in_ms: 5000/" \
		-e "s/^range_request_timeout_in_ms:.*/range_request_timeout_in_ms: 10000/" \
		-e "s/^write_request_timeout_in_ms:.*/write_request_timeout_in_ms: 2000/" \
		-e "s/^counter_write_request_timeout_in_ms:.*/counter_write_request_timeout_in_ms: 5000/" \
		-e "s/^cas_contention_timeout_in_ms:.*/cas_contention_timeout_in_ms: 1000/" \
		-e "s/^truncate_request_timeout_in_ms:.*/truncate_request_timeout_in_ms: 60000/" \
		-e "s/^request_timeout_in_ms:.*/request_timeout_in_ms: 10000/" \
		"$yaml"
	;;
tuned) sed -i -e "s/^read_request_timeout_in_ms:.*/read_request_timeout_in_ms: 1500/" "$yaml" ;;
*)
	echo "cassandra-cluster-node.sh: SILT_CASSANDRA_CLUSTER_TIMEOUTS is stock or tuned" >&2
	exit 1
	;;
esac
cat >>"$yaml" <<YAML
# Added by scripts/cassandra-cluster-node.sh
auto_bootstrap: false
max_hint_window_in_ms: 3600000
YAML
if [[ -n "${SILT_CASSANDRA_NODE_CONFIGURE:-}" ]]; then
	bash "$SILT_CASSANDRA_NODE_CONFIGURE" "$yaml"
fi
