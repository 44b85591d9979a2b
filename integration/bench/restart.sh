#!/usr/bin/env bash
# restart.sh — how long a node holding many bucket replicas takes to be
# ready again after kill -9, and the CPU it spends on the way.
#
#   integration/bench/restart.sh                    # 1 node, one table of 4096 buckets
#   BUCKETS=1024 ROUNDS=3 integration/bench/restart.sh
#   FLUSS_BIN=/path/fluss-node integration/bench/restart.sh
#   KEEP=1 ...                                      # keep the data and logs (kept anyway if not ready)
#
# Starts one node on 127.0.0.1 in a temp dir, creates a log table of
# $BUCKETS buckets, appends 5,000 rows, and then $ROUNDS times: kill -9,
# start again on the same directory, and time until /readyz answers (every
# replica open with a leader that has applied its log). Prints the seconds,
# the process CPU (user and system, /proc/<pid>/stat) until ready, and the
# elections the node held. Only the processes this script started are
# killed (by pid).
set -euo pipefail

BUCKETS=${BUCKETS:-4096}
ROUNDS=${ROUNDS:-2}
BASE_PORT=${BASE_PORT:-23700} # below the ephemeral port range (a client socket may hold one)

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fluss-restart.XXXXXX")
PID=
log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }
cleanup() {
	[[ -z $PID ]] || { kill -9 "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; } || true
	if [[ -n ${KEEP:-} ]]; then log "kept $WORK (node logs node.N.log)"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

FLUSS=${FLUSS_BIN:-$WORK/fluss-node}
[[ -n ${FLUSS_BIN:-} ]] || (cd "$ROOT" && go build -o "$FLUSS" .)
ADDR=127.0.0.1:$BASE_PORT
ARGS=(--data-dir "$WORK/data" --client-addr "$ADDR" --peer-addr "127.0.0.1:$((BASE_PORT + 1))" --gossip-addr "127.0.0.1:$((BASE_PORT + 2))")
start() {
	"$FLUSS" serve "${ARGS[@]}" 2>"$WORK/node.$1.log" &
	PID=$!
}
ready() {
	local deadline=$((SECONDS + 600))
	until curl -sf "http://$ADDR/readyz" >/dev/null; do
		if ((SECONDS > deadline)); then
			log "not ready after 600 s: $(curl -s "http://$ADDR/readyz")"
			KEEP=1
			exit 1
		fi
		sleep 0.05
	done
}
kill9() {
	kill -9 "$PID"
	wait "$PID" 2>/dev/null || true
	PID=
}

start 0
ready
"$FLUSS" db create bench --server "$ADDR" >/dev/null
log "creating a table of $BUCKETS buckets"
"$FLUSS" table create bench.t --schema "id BIGINT NOT NULL" --buckets "$BUCKETS" --server "$ADDR" >/dev/null
ready
seq 1 5000 | awk '{print "{\"id\":" $1 "}"}' | "$FLUSS" append bench.t --server "$ADDR" 2>/dev/null
hz=$(getconf CLK_TCK)
for ((r = 1; r <= ROUNDS; r++)); do
	kill9
	sync
	t0=$(date +%s.%N)
	start "$r"
	ready
	t1=$(date +%s.%N)
	read -r user sys < <(awk -v hz="$hz" '{printf "%.2f %.2f\n", $14 / hz, $15 / hz}' "/proc/$PID/stat")
	elections=$(grep -c 'stood for election' "$WORK/node.$r.log" || true)
	printf 'buckets %d, restart %d: ready after %.2f s; CPU user %s s, system %s s; %d elections\n' \
		"$BUCKETS" "$r" "$(echo "$t1 - $t0" | bc)" "$user" "$sys" "$elections"
done
