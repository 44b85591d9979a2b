#!/usr/bin/env bash
# cost.sh — what one acknowledged request costs the servers: `bench produce`
# against a fresh cluster of NODES nodes on 127.0.0.1, with the server CPU
# (/proc/<pid>/stat, user + system) and the read and write syscalls
# (/proc/<pid>/io) of all node processes over the measured run, per
# acknowledged request; also the load generator's own CPU per request and
# the Append calls the nodes answered (fluss_rpc_requests_total: with
# --appender, acknowledged rows over calls are the rows per request). Use it
# to compare two builds: run it for each in
# turn, a few times, and compare the per-request columns, which move less
# with the machine's load than throughput does.
#
#   integration/bench/cost.sh                               # 3 nodes, 1-row JSON, 64 clients, 16 buckets
#   NODES=1 integration/bench/cost.sh
#   FLUSS_BIN=/tmp/a/fluss-node integration/bench/cost.sh   # skip the build
#   integration/bench/cost.sh --appender                    # extra `bench produce` flags
#   PROF=/tmp/p integration/bench/cost.sh                   # CPU profiles /tmp/p.N.pb.gz of each node
#   EXTRA_CONFIG=/tmp/tls.toml integration/bench/cost.sh    # TOML appended to every node's config
#   TMPDIR=/mnt/data integration/bench/cost.sh              # data on another filesystem
#
# Only the processes this script started are killed (by pid); data lives in
# a temp dir (KEEP=1 keeps it).
set -euo pipefail

NODES=${NODES:-3}
CLIENTS=${CLIENTS:-64}
BUCKETS=${BUCKETS:-16}
DURATION=${DURATION:-10}
BASE_PORT=${BASE_PORT:-21000}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fluss-cost.XXXXXX")
PIDS=()
cleanup() {
	((${#PIDS[@]})) && kill "${PIDS[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	[[ ${KEEP:-} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

FLUSS=${FLUSS_BIN:-}
if [[ -z $FLUSS ]]; then
	FLUSS=$WORK/fluss-node
	go build -o "$FLUSS" "$(dirname "$0")/../.."
fi
addr() { echo "127.0.0.1:$((BASE_PORT + $1 * 10))"; }

printf '[debug]\npprof = true\n' >"$WORK/config.toml"
[[ -n ${EXTRA_CONFIG:-} ]] && cat "$EXTRA_CONFIG" >>"$WORK/config.toml"
for n in $(seq "$NODES"); do
	c=$((BASE_PORT + n * 10))
	args=(--config "$WORK/config.toml" --data-dir "$WORK/node$n" --client-addr "127.0.0.1:$c"
		--peer-addr "127.0.0.1:$((c + 1))" --gossip-addr "127.0.0.1:$((c + 2))")
	if ((n == 1)); then
		"$FLUSS" serve "${args[@]}" 2>"$WORK/node$n.log" &
	else
		"$FLUSS" join "127.0.0.1:$((BASE_PORT + 11))" "${args[@]}" 2>"$WORK/node$n.log" &
	fi
	PIDS+=($!)
	sleep 1
done
for _ in $(seq 100); do
	[[ $("$FLUSS" cluster status --server "$(addr 1)" 2>/dev/null | grep -c ' active ') == "$NODES" ]] && break
	sleep 0.3
done

bench() {
	"$FLUSS" bench produce --server "$(addr 1)" --format json --batch 1 --clients "$CLIENTS" \
		--buckets "$BUCKETS" "$@" 2>&1
}
# Warm up on a table of its own, then drop it and let its files go: the
# measured run creates bench.produce afresh, on a quiet disk.
bench --duration 3s --table bench.warmup >/dev/null
"$FLUSS" table drop bench.warmup --server "$(addr 1)" >/dev/null
sleep 3

# appends prints the Append calls all nodes have answered (forwarded ones
# count on both nodes).
appends() {
	local n sum=0 v
	for n in $(seq "$NODES"); do
		v=$(curl -s "http://$(addr "$n")/metrics" | awk '/^fluss_rpc_requests_total\{.*WriteService\/Append"/ {s += $2} END {printf "%d", s}')
		sum=$((sum + v))
	done
	echo "$sum"
}

# totals prints CPU ticks, read syscalls and write syscalls of all nodes.
totals() {
	local cpu=0 r=0 w=0 p
	for p in "${PIDS[@]}"; do
		cpu=$((cpu + $(awk '{print $14 + $15}' "/proc/$p/stat")))
		r=$((r + $(awk '/^syscr/ {print $2}' "/proc/$p/io")))
		w=$((w + $(awk '/^syscw/ {print $2}' "/proc/$p/io")))
	done
	echo "$cpu $r $w"
}
PROFS=()
if [[ -n ${PROF:-} ]]; then
	for n in $(seq "$NODES"); do
		(sleep 1 && curl -s -o "$PROF.$n.pb.gz" "http://$(addr "$n")/debug/pprof/profile?seconds=$((DURATION - 2))") &
		PROFS+=($!)
	done
fi
read -r cpu0 r0 w0 < <(totals)
calls0=$(appends)
TIMEFORMAT='%U %S'
{ time bench --duration "${DURATION}s" "$@" >"$WORK/bench.out"; } 2>"$WORK/bench.time"
out=$(cat "$WORK/bench.out")
read -r cpu1 r1 w1 < <(totals)
calls1=$(appends)
((${#PROFS[@]})) && wait "${PROFS[@]}"

echo "$out" | tail -3
reqs=$(echo "$out" | tail -1 | awk -F'|' '{gsub(/ /, "", $8); print $8 * '"$DURATION"'}')
tck=$(getconf CLK_TCK)
read -r cuser csys <"$WORK/bench.time"
awk -v n="$NODES" -v reqs="$reqs" -v calls=$((calls1 - calls0)) -v cuser="$cuser" -v csys="$csys" -v cpu=$((cpu1 - cpu0)) -v tck="$tck" -v r=$((r1 - r0)) -v w=$((w1 - w0)) 'BEGIN {
	if (reqs <= 0) { print "no requests acknowledged"; exit 1 }
	printf "%d node(s), over the run: server CPU %.0f us/request, %.1f read and %.1f write syscalls/request; client CPU %.0f us/request; %d Append calls served (%.1f rows each)\n",
		n, cpu / tck * 1e6 / reqs, r / reqs, w / reqs, (cuser + csys) * 1e6 / reqs, calls, calls ? reqs / calls : 0
}'
