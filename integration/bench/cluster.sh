#!/usr/bin/env bash
# cluster.sh — fluss-node produce throughput on one node and on a 3-node
# cluster (RF 3), side by side with a 3-node NATS JetStream cluster (R3 file
# stream, sync_interval: always), all on 127.0.0.1, same message size and
# client concurrency. Prints one comparison table (Markdown).
#
#   integration/bench/cluster.sh                       # defaults below
#   CLIENTS=64 DURATION=10s integration/bench/cluster.sh
#   FLUSS_BIN=/path/fluss-node integration/bench/cluster.sh   # skip the build
#   DIRECT=false integration/bench/cluster.sh   # all requests via node 1, which forwards
#
# Workloads (each runs on both systems):
#   1. "1 msg/request": fluss `bench produce --format json --batch 1`, NATS
#      synchronous js.Publish per message, $CLIENTS publishers each.
#   1b. "1 msg per call, shared Appender": fluss `bench produce --appender`:
#      $CLIENTS goroutines each appending one row at a time (and waiting for
#      its ack) through one batching client, as an application using
#      Fluss's append writer does; NATS has no counterpart but row 1. Once
#      per value of $APPENDER_INFLIGHT (default "1 2"), the requests the
#      Appender keeps out at once (its default 1: one request carrying every
#      goroutine's row; 2 splits them over two).
#   2. "batched" (BATCHED=1, default): fluss Arrow requests of $BATCH_ROWS rows
#      from $BATCH_CLIENTS clients; NATS PublishAsync with a window of
#      $NATS_WINDOW per publisher from $BATCH_CLIENTS publishers.
#   3. "batched, equal size" (with BATCHED=1): fluss JSON requests of
#      $NATS_WINDOW rows (~200 bytes each, like the NATS messages) from
#      $BATCH_CLIENTS clients: as many messages of the same size in flight
#      per client as NATS's window.
# A fluss row and a NATS message both count once acknowledged (committed on
# a quorum with fsync). NATS messages are $SIZE random bytes, about the size
# of one fluss sample row as JSON.
#
# Everything runs in a temp dir, kept when a step fails (or with KEEP=1); only
# the processes this script started are killed (by pid). Each step is bounded with timeout(1).
set -euo pipefail

CLIENTS=${CLIENTS:-64}
BUCKETS=${BUCKETS:-16}
DURATION=${DURATION:-10s}
SIZE=${SIZE:-200}
BATCHED=${BATCHED:-1}
BATCH_ROWS=${BATCH_ROWS:-2000}
BATCH_CLIENTS=${BATCH_CLIENTS:-8}
NATS_WINDOW=${NATS_WINDOW:-256}
APPENDER_INFLIGHT=${APPENDER_INFLIGHT:-1 2}
NATS_STREAMS=${NATS_STREAMS:-1}
NATS_VERSION=v2.15.2
DIRECT=${DIRECT:-true}
BASE_PORT=${BASE_PORT:-24100} # below the ephemeral port range (a client socket may hold one)
KEEP=${KEEP:-0}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fluss-clusterbench.XXXXXX")
BIN_CACHE=${BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fluss-node-bench/bin}
PIDS=()

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

cleanup() {
	local rc=$? pid
	for pid in "${PIDS[@]}"; do
		kill -9 "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
	if [[ $KEEP == 1 || $rc != 0 ]]; then
		log "kept $WORK (the nodes' logs are there)"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT

# stop_all kills (by pid) every process started so far.
stop_all() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	PIDS=()
}

# wait_until SECONDS CMD...: retry CMD every 0.2 s until it succeeds.
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then
			log "timed out waiting for: $*"
			return 1
		fi
		sleep 0.2
	done
}

# --- build ------------------------------------------------------------------
if [[ -n ${FLUSS_BIN:-} ]]; then
	FLUSS=$FLUSS_BIN
else
	log "building fluss-node"
	(cd "$ROOT" && go build -o "$WORK/fluss-node" .)
	FLUSS=$WORK/fluss-node
fi
mkdir -p "$BIN_CACHE"
NATS_SERVER=$BIN_CACHE/nats-server-$NATS_VERSION
if [[ ! -x $NATS_SERVER ]]; then
	log "installing nats-server $NATS_VERSION into $BIN_CACHE"
	GOBIN=$WORK/gobin go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
	mv "$WORK/gobin/nats-server" "$NATS_SERVER"
fi
log "building natsbench"
(cd "$ROOT/integration/bench/natsbench" && go build -o "$WORK/natsbench" .)
NATSBENCH=$WORK/natsbench

ROWS=()   # result rows of the comparison table

# fluss_row SYSTEM WORKLOAD < bench produce output: one comparison row.
# bench columns: format|compression|clients|rows/request|buckets|rows/s|
# requests/s|MB/s|p50|p99|errors|disk bytes/row
fluss_row() {
	awk -F'|' -v sys="$1" -v wl="$2" '
		/^\| (json|arrow)/ {
			gsub(/ /, "", $0)
			split($0, c, "|")
			rows = c[7]; mb = c[9]
			# MB/s has one decimal: too coarse for 1-row JSON requests,
			# whose rows are ~200 bytes of JSON (10 sample columns).
			bytes = (rows > 0 && mb >= 5) ? sprintf("%.0f/row", mb * 1e6 / rows) : "~200/row (JSON)"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", sys, wl, c[4], bytes, rows, mb, c[10], c[11], c[12]
		}'
}

# --- fluss-node ---------------------------------------------------------------
# start_fluss N: node N (1-based) on ports BASE_PORT+N*10+{0,1,2}; node 1
# serves, the others join node 1.
start_fluss() {
	local n=$1 c=$((BASE_PORT + $1 * 10)) args
	args=(--data-dir "$WORK/fluss$n" --client-addr "127.0.0.1:$c" --peer-addr "127.0.0.1:$((c + 1))" --gossip-addr "127.0.0.1:$((c + 2))")
	if ((n == 1)); then
		"$FLUSS" serve "${args[@]}" 2>"$WORK/fluss$n.log" &
	else
		"$FLUSS" join "127.0.0.1:$((BASE_PORT + 11))" "${args[@]}" 2>"$WORK/fluss$n.log" &
	fi
	PIDS+=($!)
}
fluss_addr() { echo "127.0.0.1:$((BASE_PORT + $1 * 10))"; }

# cluster_has N: `cluster status` lists N active nodes.
cluster_has() {
	local got
	got=$("$FLUSS" cluster status --server "$(fluss_addr 1)" | grep -c ' active ') || true
	[[ $got == "$1" ]]
}

# run_fluss SYSTEM: both workloads, one comparison row each. The bench learns
# the cluster from node 1 and, with DIRECT=true, sends each request straight
# to its bucket's leader.
run_fluss() {
	local sys=$1 out
	"$FLUSS" db create bench --server "$(fluss_addr 1)" >/dev/null 2>&1 || true
	out=$(timeout 300 "$FLUSS" bench produce --server "$(fluss_addr 1)" --direct="$DIRECT" --format json --batch 1 \
		--clients "$CLIENTS" --buckets "$BUCKETS" --duration "$DURATION")
	echo "$out" >&2
	ROWS+=("$(fluss_row "$sys" "1 msg/request, json, $BUCKETS buckets" <<<"$out")")
	for inflight in $APPENDER_INFLIGHT; do
		out=$(timeout 300 "$FLUSS" bench produce --server "$(fluss_addr 1)" --direct="$DIRECT" --format json --batch 1 --appender \
			--appender-inflight "$inflight" --clients "$CLIENTS" --buckets "$BUCKETS" --duration "$DURATION")
		echo "$out" >&2
		ROWS+=("$(fluss_row "$sys" "1 msg per call, json, one shared Appender (requests out: $inflight), $BUCKETS buckets" <<<"$out")")
	done
	if [[ $BATCHED == 1 ]]; then
		out=$(timeout 300 "$FLUSS" bench produce --server "$(fluss_addr 1)" --direct="$DIRECT" --format arrow --batch "$BATCH_ROWS" \
			--clients "$BATCH_CLIENTS" --buckets "$BUCKETS" --duration "$DURATION")
		echo "$out" >&2
		ROWS+=("$(fluss_row "$sys" "batched, arrow $BATCH_ROWS rows/request, $BUCKETS buckets" <<<"$out")")
		out=$(timeout 300 "$FLUSS" bench produce --server "$(fluss_addr 1)" --direct="$DIRECT" --format json --batch "$NATS_WINDOW" \
			--clients "$BATCH_CLIENTS" --buckets "$BUCKETS" --duration "$DURATION")
		echo "$out" >&2
		ROWS+=("$(fluss_row "$sys" "batched, json $NATS_WINDOW rows/request, $BUCKETS buckets" <<<"$out")")
	fi
}

log "fluss-node: single node"
start_fluss 1
wait_until 30 cluster_has 1
run_fluss "fluss-node 1 node"
stop_all
rm -rf "$WORK"/fluss?

log "fluss-node: 3 nodes"
start_fluss 1
wait_until 30 cluster_has 1
start_fluss 2
start_fluss 3
wait_until 60 cluster_has 3
run_fluss "fluss-node 3 nodes RF3"
# The bench table takes the default replication factor: 3 on 3 nodes.
"$FLUSS" table describe bench.produce --server "$(fluss_addr 1)" | awk '/^-/ {print "bucket", $2, "leader", $3, "replicas", $4, $5, $6}' | head -3 >&2
stop_all

# --- NATS JetStream -------------------------------------------------------------
nats_port() { echo $((BASE_PORT + 50 + $1)); }       # client
route_port() { echo $((BASE_PORT + 60 + $1)); }      # cluster routes
mon_port() { echo $((BASE_PORT + 70 + $1)); }        # monitoring (healthz)
for n in 1 2 3; do
	routes=""
	for m in 1 2 3; do
		((m == n)) || routes+="nats-route://127.0.0.1:$(route_port $m), "
	done
	cat >"$WORK/nats$n.conf" <<EOF
server_name: n$n
listen: 127.0.0.1:$(nats_port $n)
http: 127.0.0.1:$(mon_port $n)
jetstream {
  store_dir: "$WORK/nats$n"
  sync_interval: always
}
cluster {
  name: bench
  listen: 127.0.0.1:$(route_port $n)
  routes: [ ${routes%, } ]
}
EOF
done
log "NATS JetStream: 3 nodes"
for n in 1 2 3; do
	"$NATS_SERVER" -c "$WORK/nats$n.conf" 2>"$WORK/nats$n.log" &
	PIDS+=($!)
done
for n in 1 2 3; do
	wait_until 60 curl -fsS "http://127.0.0.1:$(mon_port $n)/healthz?js-enabled-only=true"
done
# Healthy is not ready: stream requests wait for a JetStream meta leader.
meta_leader() { curl -fsS "http://127.0.0.1:$(mon_port 1)/jsz" | grep -Eq '"leader": *"n[123]"'; }
wait_until 60 meta_leader
SERVERS="nats://127.0.0.1:$(nats_port 1),nats://127.0.0.1:$(nats_port 2),nats://127.0.0.1:$(nats_port 3)"
ROWS+=("$(timeout 300 "$NATSBENCH" --servers "$SERVERS" --mode sync --clients "$CLIENTS" --size "$SIZE" \
	--streams "$NATS_STREAMS" --duration "$DURATION" --label "1 msg/request, sync js.Publish, $NATS_STREAMS stream(s) R3")")
if [[ $BATCHED == 1 ]]; then
	ROWS+=("$(timeout 300 "$NATSBENCH" --servers "$SERVERS" --mode async --window "$NATS_WINDOW" --clients "$BATCH_CLIENTS" \
		--size "$SIZE" --streams "$NATS_STREAMS" --duration "$DURATION" \
		--label "batched, PublishAsync window $NATS_WINDOW, $NATS_STREAMS stream(s) R3")")
fi
stop_all

# --- table ----------------------------------------------------------------------
echo
echo "machine: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg); $DURATION per row"
echo
echo "| system | workload | clients | msg bytes | acked msgs/s | MB/s | p50 | p99 | errors |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${ROWS[@]}"
