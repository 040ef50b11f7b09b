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
#
# Every node uses the same native and storage ports on its own address: Cassandra 2.1 dials
# its peers on its own storage_port. auto_bootstrap is off so that all nodes can start at
# once on empty data directories (nothing to stream), and hinted hand-off is on so that a
# restarted node receives the writes it missed.
#
# The dynamic snitch is on, as by default. The read timeout is 3 s where the single test node
# has 10 s: a coordinator whose read waits on a replica that died (until gossip convicts it,
# ~18 s) sends the read to another replica after the table's 99th-percentile read latency,
# which it recomputes once per read timeout and takes as half the read timeout until then;
# half of 10 s is longer than the clients' 3 s request timeout. The other server timeouts stay
# the single node's generous ones: on a loaded 2-core machine, shorter write and Paxos
# timeouts turn racing LWTs into write timeouts whose outcome no client can settle.
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
	-e "s/^read_request_timeout_in_ms:.*/read_request_timeout_in_ms: 1500/" \
	"$yaml"
cat >>"$yaml" <<YAML
# Added by scripts/cassandra-cluster-node.sh
auto_bootstrap: false
max_hint_window_in_ms: 3600000
YAML
if [[ -n "${SILT_CASSANDRA_NODE_CONFIGURE:-}" ]]; then
	bash "$SILT_CASSANDRA_NODE_CONFIGURE" "$yaml"
fi
