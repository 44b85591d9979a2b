#!/usr/bin/env bash
# lakescan.sh — the union read against the log read: the same rows scanned
# from EARLIEST with the CLI out of a table whose log holds them and out of
# a lake table (table.datalake.enabled) whose table.log.ttl has dropped them
# from the log, so that they come from its Parquet files. One node on
# 127.0.0.1; the first scan of the lake table decodes its files, the later
# ones find them decoded (the node keeps four).
#
#   integration/bench/lakescan.sh
#   ROWS=500000 FLUSS_BIN=/tmp/a/fluss-node integration/bench/lakescan.sh
#
# Only the process this script started is killed (by pid); data lives in a
# temp dir (KEEP=1 keeps it).
set -euo pipefail

ROWS=${ROWS:-200000}
BASE_PORT=${BASE_PORT:-21500}

WORK=$(mktemp -d /tmp/fluss-lakescan.XXXXXX)
PID=
cleanup() {
	[[ -n $PID ]] && kill "$PID" 2>/dev/null || true
	wait 2>/dev/null || true
	[[ ${KEEP:-} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

FLUSS=${FLUSS_BIN:-}
if [[ -z $FLUSS ]]; then
	FLUSS=$WORK/fluss-node
	go build -o "$FLUSS" "$(dirname "$0")/../.."
fi
cat >"$WORK/config.toml" <<EOT
data_dir = "$WORK/data"
client_addr = "127.0.0.1:$BASE_PORT"
peer_addr = "127.0.0.1:$((BASE_PORT + 1))"
gossip_addr = "127.0.0.1:$((BASE_PORT + 2))"
[storage]
segment_bytes = 1048576
retention_check_interval = "200ms"
[tiering]
lake_dir = "$WORK/lake"
EOT
"$FLUSS" serve --config "$WORK/config.toml" 2>"$WORK/node.log" &
PID=$!
export FLUSS_SERVER=127.0.0.1:$BASE_PORT
for _ in $(seq 50); do "$FLUSS" db list >/dev/null 2>&1 && break; sleep 0.2; done

"$FLUSS" db create lk >/dev/null
schema="id BIGINT NOT NULL, user_id BIGINT, kind STRING, country STRING, amount DOUBLE, ts TIMESTAMP(3)"
"$FLUSS" table create lk.log --schema "$schema" >/dev/null
"$FLUSS" table create lk.lake --schema "$schema" --set table.log.ttl=5s \
	--set table.datalake.enabled=true --set table.datalake.freshness=1s >/dev/null
python3 -c "
import json, random
r = random.Random(1)
for i in range($ROWS):
    print(json.dumps({'id': i, 'user_id': r.randrange(100000), 'kind': r.choice(['view', 'click', 'buy', 'cart']),
                      'country': r.choice(['DE', 'FR', 'US', 'JP', 'BR']), 'amount': round(r.random() * 100, 2),
                      'ts': 1764583200000 + i}))" >"$WORK/rows.ndjson"
"$FLUSS" append lk.log --batch 2000 <"$WORK/rows.ndjson" >/dev/null 2>&1
"$FLUSS" append lk.lake --batch 2000 <"$WORK/rows.ndjson" >/dev/null 2>&1
lake_segments() { ls "$WORK"/data/buckets/2/*/*/log/*.log | wc -l; }
for _ in $(seq 120); do # the lake passes, then the 5 s TTL
	(($(lake_segments) == 1)) && break
	sleep 0.5
done
echo "lake table: $(lake_segments) log segment(s) left, $(ls "$WORK"/lake/lk/lake/*/bucket=0/ | wc -l) lake file(s)"

for t in log lake log lake log lake; do
	start=$(date +%s%N)
	n=$("$FLUSS" scan "lk.$t" --from earliest --limit "$ROWS" | wc -l)
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "scan lk.$t from earliest: $n rows in $ms ms ($((n * 1000 / ms)) rows/s)"
done
curl -s "http://127.0.0.1:$BASE_PORT/metrics" | grep -E '^fluss_lake_(files|batches)_read_total'
