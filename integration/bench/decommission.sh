#!/usr/bin/env bash
# decommission.sh — how long `cluster decommission` takes to move a node's
# data off it while writers go on.
#
#   integration/bench/decommission.sh                 # 4 nodes, 12 buckets of 3 replicas, 20 s of load
#   LOAD=60s BUCKETS=24 integration/bench/decommission.sh
#   FLUSS_BIN=/path/fluss-node integration/bench/decommission.sh   # skip the build
#   KEEP=1 ...                                        # keep the data and logs
#
# Starts four nodes on 127.0.0.1 in a temp dir (node 1 serves, the others
# join it), fills a table (`bench produce`, Arrow, zstd, default replication
# factor 3) for $LOAD, then decommissions node 4 with `--wait` while a
# second `bench produce` of 1-row JSON requests runs through node 1 for
# $WRITE, and prints the bytes node 4 held, the seconds the decommission
# took, and the writers' table (requests/s, latency, errors). Only the processes this script started are
# killed (by pid).
set -euo pipefail

BUCKETS=${BUCKETS:-12}
LOAD=${LOAD:-20s}
WRITE=${WRITE:-60s} # the 1-row writers' run, started 3 s before the decommission
BASE_PORT=${BASE_PORT:-24300} # below the ephemeral port range (a client socket may hold one)

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fluss-decommission.XXXXXX")
PIDS=()
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [[ -n ${KEEP:-} ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

FLUSS=${FLUSS_BIN:-$WORK/fluss-node}
[[ -n ${FLUSS_BIN:-} ]] || (cd "$ROOT" && go build -o "$FLUSS" .)
addr() { echo "127.0.0.1:$((BASE_PORT + $1 * 10))"; }
start() {
	local n=$1 c=$((BASE_PORT + $1 * 10)) args
	args=(--data-dir "$WORK/node$n" --client-addr "127.0.0.1:$c" --peer-addr "127.0.0.1:$((c + 1))" --gossip-addr "127.0.0.1:$((c + 2))")
	if ((n == 1)); then
		"$FLUSS" serve "${args[@]}" 2>"$WORK/node$n.log" &
	else
		"$FLUSS" join "127.0.0.1:$((BASE_PORT + 11))" "${args[@]}" 2>"$WORK/node$n.log" &
	fi
	PIDS+=($!)
}
active() { "$FLUSS" cluster status --server "$(addr 1)" 2>/dev/null | grep -c ' active ' || true; }

for n in 1 2 3 4; do
	start "$n"
	[[ $n == 1 ]] && until curl -sf "http://$(addr 1)/readyz" >/dev/null; do sleep 0.1; done
done
until [[ $(active) == 4 ]]; do sleep 0.2; done
log "4 nodes up; loading bench.d ($BUCKETS buckets) for $LOAD"
"$FLUSS" db create bench --server "$(addr 1)" >/dev/null
"$FLUSS" bench produce --server "$(addr 1)" --table bench.d --buckets "$BUCKETS" --duration "$LOAD" --clients 8 >&2
"$FLUSS" bench produce --server "$(addr 1)" --table bench.w --buckets "$BUCKETS" --format json --batch 1 --clients 16 --duration "$WRITE" >"$WORK/writes.txt" 2>&1 &
writer=$!
PIDS+=("$writer")
sleep 3
held=$(du -sb "$WORK/node4" | cut -f1)
replicas=$("$FLUSS" cluster status --server "$(addr 1)" | awk '$1 == 4 {print $4}')
log "node 4 holds $replicas replicas (both tables), $held bytes on disk; decommissioning it under 1-row writes"
t0=$(date +%s.%N)
"$FLUSS" cluster decommission 4 --wait 30m --server "$(addr 1)" >&2
t1=$(date +%s.%N)
secs=$(echo "$t1 - $t0" | bc)
printf 'decommission of node 4: %s replicas, %.1f MB on disk, done in %.1f s (%.1f MB/s)\n' \
	"$replicas" "$(echo "$held / 1000000" | bc -l)" "$secs" "$(echo "$held / 1000000 / $secs" | bc -l)"
"$FLUSS" cluster status --server "$(addr 1)"
wait "$writer" || true
log "1-row writes during the decommission (the first 3 s are before it; errors: failed requests):"
cat "$WORK/writes.txt"
