#!/usr/bin/env bash
# idle.sh — idle CPU and memory of fluss-node holding many bucket replicas.
#
#   integration/bench/idle.sh                 # 1 node, 1000 buckets
#   NODES=3 integration/bench/idle.sh         # 3 nodes, RF 3: 1000 replicas each
#   FLUSS_BIN=/path/fluss-node CONFIG=my.toml integration/bench/idle.sh
#
# CONFIG replaces the generated config (storage.segment_bytes =
# $SEGMENT_BYTES, default 1 MiB as in the recorded runs, and [debug] pprof =
# $PPROF).
#
# Starts the node(s) on 127.0.0.1 in a temp dir, creates $TABLES log tables
# of $BUCKETS/$TABLES buckets each, waits until every bucket has a leader,
# lets the cluster settle for $SETTLE seconds, then samples every node's
# process CPU (utime+stime from /proc/<pid>/stat) over $WINDOW seconds and
# its RSS (VmRSS from /proc/<pid>/status). With PPROF=1 it also saves a 30 s
# CPU profile of node 1 (config [debug] pprof = true) and prints its top.
# Only the processes this script started are killed (by pid).
set -euo pipefail

NODES=${NODES:-1}
BUCKETS=${BUCKETS:-1000}
TABLES=${TABLES:-10}
SETTLE=${SETTLE:-15}
WINDOW=${WINDOW:-30}
PPROF=${PPROF:-0}
BASE_PORT=${BASE_PORT:-23600} # below the ephemeral port range (a client socket may hold one)
KEEP=${KEEP:-0}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fluss-idle.XXXXXX")
PIDS=()
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [[ $KEEP == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

if [[ -n ${FLUSS_BIN:-} ]]; then
	FLUSS=$FLUSS_BIN
else
	log "building fluss-node"
	(cd "$ROOT" && go build -o "$WORK/fluss-node" .)
	FLUSS=$WORK/fluss-node
fi
# Every idle bucket replica reserves (fallocates) 64 KiB of its active
# segment, or all of it when storage.segment_bytes is smaller: 1000 idle
# replicas hold ~64 MiB. The run checks the disk first.
SEGMENT_BYTES=${SEGMENT_BYTES:-1048576}
reserve=$((SEGMENT_BYTES < 65536 ? SEGMENT_BYTES : 65536))
need_kib=$((BUCKETS * NODES * reserve / 1024 * 2))
avail_kib=$(df --output=avail -k "$WORK" | tail -1)
if ((avail_kib < need_kib)); then
	log "need ~$((need_kib / 1024)) MiB free under $WORK for $BUCKETS x $NODES replicas reserving $reserve bytes each; $((avail_kib / 1024)) MiB available"
	exit 1
fi
if [[ -n ${CONFIG:-} ]]; then
	cp "$CONFIG" "$WORK/node.toml"
else
	printf '[storage]\nsegment_bytes = %d\n\n[debug]\npprof = %s\n' "$SEGMENT_BYTES" \
		"$([[ $PPROF == 1 ]] && echo true || echo false)" >"$WORK/node.toml"
fi
CONF_ARGS=(--config "$WORK/node.toml")

addr() { echo "127.0.0.1:$((BASE_PORT + $1 * 10))"; }
start_node() {
	local n=$1 c=$((BASE_PORT + $1 * 10)) args
	args=(--data-dir "$WORK/d$n" --client-addr "127.0.0.1:$c" --peer-addr "127.0.0.1:$((c + 1))" --gossip-addr "127.0.0.1:$((c + 2))" "${CONF_ARGS[@]}")
	if ((n == 1)); then
		"$FLUSS" serve "${args[@]}" 2>"$WORK/node$n.log" &
	else
		"$FLUSS" join "127.0.0.1:$((BASE_PORT + 11))" "${args[@]}" 2>"$WORK/node$n.log" &
	fi
	PIDS+=($!)
}
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then log "timed out waiting for: $*"; return 1; fi
		sleep 0.5
	done
}
active_is() { [[ $("$FLUSS" cluster status --server "$(addr 1)" | grep -c ' active ') == "$1" ]]; }
# led_buckets: buckets of all tables with a leader (layout rows whose
# LEADER column is a node id).
led_buckets() {
	local t total=0 n
	for ((t = 0; t < TABLES; t++)); do
		n=$("$FLUSS" table describe "idle.t$t" --server "$(addr 1)" 2>/dev/null | awk '$1 == "-" && $3 ~ /^[1-9][0-9]*$/' | wc -l)
		total=$((total + n))
	done
	echo "$total"
}
all_led() { [[ $(led_buckets) == "$BUCKETS" ]]; }

log "starting $NODES node(s)"
start_node 1
wait_until 60 active_is 1
for ((n = 2; n <= NODES; n++)); do start_node "$n"; done
wait_until 120 active_is "$NODES"
"$FLUSS" db create idle --server "$(addr 1)" >/dev/null
per=$((BUCKETS / TABLES))
log "creating $TABLES tables x $per buckets (RF $NODES)"
t0=$SECONDS
for ((t = 0; t < TABLES; t++)); do
	"$FLUSS" table create "idle.t$t" --schema "id BIGINT NOT NULL, v STRING" --buckets "$per" \
		--set "table.replication.factor=$NODES" --server "$(addr 1)" >/dev/null
done
wait_until 600 all_led
log "all $BUCKETS buckets led after $((SECONDS - t0)) s; settling ${SETTLE}s"
sleep "$SETTLE"

hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
threads() { awk '/^Threads:/ {print $2}' "/proc/$1/status"; }
declare -A before
for pid in "${PIDS[@]}"; do before[$pid]=$(ticks "$pid"); done
start_ns=$(date +%s%N)
if [[ $PPROF == 1 ]]; then
	curl -fsS -o "$WORK/cpu.pprof" "http://$(addr 1)/debug/pprof/profile?seconds=$WINDOW"
else
	sleep "$WINDOW"
fi
end_ns=$(date +%s%N)
secs=$(awk -v a="$start_ns" -v b="$end_ns" 'BEGIN {print (b - a) / 1e9}')

echo
echo "machine: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$NODES node(s), $BUCKETS buckets (RF $NODES), ${secs}s window after ${SETTLE}s settle"
echo
echo "| node | replicas | CPU % of one core | RSS MiB | threads |"
echo "| --- | --- | --- | --- | --- |"
i=0
for pid in "${PIDS[@]}"; do
	i=$((i + 1))
	d=$(($(ticks "$pid") - before[$pid]))
	replicas=$(curl -fsS "http://$(addr $i)/metrics" | awk '/^fluss_bucket_replicas / {print $2}')
	awk -v d="$d" -v hz="$hz" -v s="$secs" -v r="$(rss_kib "$pid")" -v n="$i" -v rep="$replicas" -v th="$(threads "$pid")" \
		'BEGIN {printf "| %d | %s | %.1f | %.0f | %s |\n", n, rep, 100 * d / hz / s, r / 1024, th}'
done
if [[ $PPROF == 1 ]]; then
	echo
	go tool pprof -top -nodecount=25 "$FLUSS" "$WORK/cpu.pprof" 2>/dev/null | head -35
fi
