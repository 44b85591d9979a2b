package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/table"
	"github.com/fluss-node/fluss-node/node/nodetest"
)

// TestTieringThroughTheBinary configures tiering in a config file, writes
// ~6 MiB through the CLI into 1 MiB segments, waits until the closed
// segments are in the remote directory and only two remain locally, then
// kill -9s and restarts the node: `scan --from earliest` still returns
// every row, in order, from the remote log and the local one.
func TestTieringThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir, remote := t.TempDir(), t.TempDir()
	config := fmt.Sprintf("[storage]\nsegment_bytes = 1048576\n\n[tiering]\nremote_dir = %q\ninterval = \"100ms\"\nlocal_segments = 1\n", remote)
	p := startNodeWithConfig(t, dir, config)
	mustCLI(t, p.addr, "", "db", "create", "tier")
	mustCLI(t, p.addr, "", "table", "create", "tier.t", "--schema", "id BIGINT NOT NULL, s STRING", "--buckets", "1",
		"--set", "table.log.arrow.compression.type=NONE")
	const rows = 3000
	mustCLI(t, p.addr, bigRows(rows, 5), "append", "tier.t", "--batch", "100") // ~200 KB requests

	count := func(pattern string) int {
		m, _ := filepath.Glob(pattern)
		return len(m)
	}
	local := filepath.Join(dir, "buckets", "*", "*", "*", "log", "*.log")
	tiered := filepath.Join(remote, "t*", "p*", "b0", "*.log")
	waitFor(t, 30*time.Second, func() error {
		if l, r := count(local), count(tiered); l != 2 || r < 4 {
			return fmt.Errorf("%d local and %d remote segments, want 2 and >= 4", l, r)
		}
		return nil
	})

	p.kill()
	p = startNodeWithConfig(t, dir, config)
	scanFromEarliest(t, p.addr, "tier.t", rows)
	if l := count(local); l != 2 {
		t.Fatalf("%d local segments after the restart, want 2", l)
	}
}

// bigRows is n NDJSON rows {"id": i, "s": 2,000 random letters}, ids 0..n-1.
func bigRows(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var in strings.Builder
	for i := range n {
		s := make([]byte, 2000)
		for k := range s {
			s[k] = 'a' + byte(rng.IntN(26))
		}
		fmt.Fprintf(&in, "{\"id\":%d,\"s\":%q}\n", i, s)
	}
	return in.String()
}

// scanFromEarliest scans table's ids from EARLIEST through the CLI and
// checks they are 0..rows-1, in order, each once.
func scanFromEarliest(t *testing.T, addr, table string, rows int) {
	t.Helper()
	out := mustCLI(t, addr, "", "scan", table, "--from", "earliest", "--columns", "id", "--limit", fmt.Sprint(rows)).stdout
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != rows {
		t.Fatalf("scan returned %d rows, want %d", len(lines), rows)
	}
	for i, line := range lines {
		var row struct{ ID int64 }
		if err := json.Unmarshal([]byte(line), &row); err != nil || row.ID != int64(i) {
			t.Fatalf("row %d of the scan is %s (%v)", i, line, err)
		}
	}
}

// TestLakeUnionReadThroughTheBinary: a lake table (table.datalake.enabled,
// lake_dir in the config file) whose table.log.ttl has dropped the closed
// segments from the log still scans from offset 0 through the CLI after a
// kill -9 and restart: the lake's rows, then the log's, each once.
func TestLakeUnionReadThroughTheBinary(t *testing.T) {
	longMultiProcess(t)
	dir, lake := t.TempDir(), t.TempDir()
	config := fmt.Sprintf("[storage]\nsegment_bytes = 1048576\nretention_check_interval = \"200ms\"\n\n[tiering]\nlake_dir = %q\n", lake)
	p := startNodeWithConfig(t, dir, config)
	mustCLI(t, p.addr, "", "db", "create", "lk")
	mustCLI(t, p.addr, "", "table", "create", "lk.t", "--schema", "id BIGINT NOT NULL, s STRING", "--buckets", "1",
		"--set", "table.log.arrow.compression.type=NONE", "--set", "table.log.ttl=3s",
		"--set", "table.datalake.enabled=true", "--set", "table.datalake.freshness=1s")
	const rows = 3000
	mustCLI(t, p.addr, bigRows(rows, 7), "append", "lk.t", "--batch", "100")
	local := filepath.Join(dir, "buckets", "*", "*", "*", "log", "*.log")
	waitFor(t, 30*time.Second, func() error {
		if m, _ := filepath.Glob(local); len(m) != 1 {
			return fmt.Errorf("%d local segments, want the active one alone", len(m))
		}
		return nil
	})
	if m, _ := filepath.Glob(filepath.Join(lake, "lk", "t", "*", "bucket=0", "*.parquet")); len(m) == 0 {
		t.Fatal("no lake files")
	}
	p.kill()
	p = startNodeWithConfig(t, dir, config)
	scanFromEarliest(t, p.addr, "lk.t", rows)
	if n := metricValue(t, p.addr, "fluss_lake_files_read_total"); n < 1 {
		t.Fatalf("fluss_lake_files_read_total = %d after the scan, want the lake read", n)
	}
	// The lake is an Iceberg table too (lake_format's default): an engine
	// reading it through the Hadoop catalog at lake_dir gets every row once.
	waitFor(t, 30*time.Second, func() error {
		ids, err := icebergIDs(lake, "lk", "t")
		if err != nil {
			return err
		}
		for i, id := range ids {
			if id != int64(i) {
				return fmt.Errorf("Iceberg table lk.t: row %d has id %d (%d rows)", i, id, len(ids))
			}
		}
		if len(ids) != rows {
			return fmt.Errorf("Iceberg table lk.t has %d rows, want %d", len(ids), rows)
		}
		return nil
	})
}

// icebergIDs reads the id column of table db.name of the Hadoop catalog
// at lake with iceberg-go, sorted.
func icebergIDs(lake, db, name string) ([]int64, error) {
	ctx := context.Background()
	cat, err := hadoop.NewCatalog("check", lake, iceberg.Properties{})
	if err != nil {
		return nil, err
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{db, name})
	if err != nil {
		return nil, err
	}
	at, err := tbl.Scan(table.WithSelectedFields("id")).ToArrowTable(ctx)
	if err != nil {
		return nil, err
	}
	defer at.Release()
	var ids []int64
	for _, chunk := range at.Column(0).Data().Chunks() {
		ids = append(ids, chunk.(*array.Int64).Int64Values()...)
	}
	slices.Sort(ids)
	return ids, nil
}

// TestClusterTieringKillNine: three processes share a remote directory. A
// 1-bucket RF3 table's rows go to the remote log; its leader is kill -9'ed,
// more rows are written through the others, the killed node restarts, and
// then every node tiers down to at most two local segments and scans every
// row, in order, from the remote log and its own.
func TestClusterTieringKillNine(t *testing.T) {
	longMultiProcess(t)
	remote := t.TempDir()
	nodes := startJoinedCluster(t, fmt.Sprintf(
		"[storage]\nsegment_bytes = 1048576\n\n[tiering]\nremote_dir = %q\ninterval = \"100ms\"\nlocal_segments = 1\n", remote))
	mustCLI(t, nodes[0].client, "", "db", "create", "tier")
	mustCLI(t, nodes[0].client, "", "table", "create", "tier.t", "--schema", "id BIGINT NOT NULL, s STRING", "--buckets", "1",
		"--set", "table.log.arrow.compression.type=NONE", "--set", "table.replication.factor=3")
	rng := rand.New(rand.NewPCG(11, 12))
	rows := func(from, to int) string {
		var in strings.Builder
		for i := from; i < to; i++ {
			s := make([]byte, 2000)
			for k := range s {
				s[k] = 'a' + byte(rng.IntN(26))
			}
			fmt.Fprintf(&in, "{\"id\":%d,\"s\":%q}\n", i, s)
		}
		return in.String()
	}
	count := func(pattern string) int {
		m, _ := filepath.Glob(pattern)
		return len(m)
	}
	tiered := filepath.Join(remote, "t*", "p*", "b0", "*.log")
	mustCLI(t, nodes[0].client, rows(0, 3000), "append", "tier.t", "--batch", "100")
	waitFor(t, 30*time.Second, func() error {
		if r := count(tiered); r < 4 {
			return fmt.Errorf("%d remote segments, want >= 4", r)
		}
		return nil
	})

	var layout struct {
		Buckets []struct {
			Leader int `json:"leader"`
		} `json:"buckets"`
	}
	mustCall(t, nodes[1].client, "AdminService/GetTableLayout", map[string]any{"table": "tier.t"}, &layout)
	victim := layout.Buckets[0].Leader - 1
	if victim < 0 {
		t.Fatalf("no leader in %+v", layout)
	}
	nodes[victim].p.kill()
	alive := nodes[(victim+1)%3]
	mustCLI(t, alive.client, rows(3000, 6000), "append", "tier.t", "--batch", "100")
	nodes[victim].start(t)

	waitFor(t, 60*time.Second, func() error {
		for i, n := range nodes {
			// Two, or fewer if the restarted node caught up from a raft
			// snapshot (its log then starts at the leader's log start).
			if l := count(filepath.Join(n.dir, "buckets", "*", "*", "*", "log", "*.log")); l > 2 {
				return fmt.Errorf("node %d holds %d local segments, want at most 2", i+1, l)
			}
		}
		if r := count(tiered); r < 8 {
			return fmt.Errorf("%d remote segments, want >= 8", r)
		}
		return nil
	})
	// Every row reads from offset 0 through every node: the remote log
	// holds what the replicas dropped, and a replica that caught up from a
	// raft snapshot took the leader's local log with it.
	waitFor(t, 30*time.Second, func() error {
		var offs struct {
			Offsets []struct {
				Offset any `json:"offset"` // int64 as a string; absent when 0
			} `json:"offsets"`
		}
		if err := call(context.Background(), nodes[0].client, "AdminService/ListOffsets", map[string]any{"table": "tier.t", "spec": "EARLIEST"}, &offs); err != nil {
			return err
		}
		if len(offs.Offsets) != 1 || (offs.Offsets[0].Offset != nil && jsonInt(offs.Offsets[0].Offset) != 0) {
			return fmt.Errorf("EARLIEST = %+v, want 0", offs)
		}
		return nil
	})
	for i, n := range nodes {
		// The restarted node takes its preferred leadership back meanwhile:
		// a scan that meets the election fails as unavailable, and is run
		// again; any other failure fails the test.
		var out string
		waitFor(t, 30*time.Second, func() error {
			r := runCLI(t, n.client, "", "scan", "tier.t", "--from", "earliest", "--columns", "id", "--limit", "6000")
			if r.code != 0 && strings.Contains(r.stderr, "unavailable") {
				return fmt.Errorf("scan through node %d: %s", i+1, r.stderr)
			}
			if r.code != 0 {
				t.Fatalf("scan through node %d: exit %d: %s", i+1, r.code, r.stderr)
			}
			out = r.stdout
			return nil
		})
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 6000 {
			t.Fatalf("scan through node %d returned %d rows, want 6000", i+1, len(lines))
		}
		for k, line := range lines {
			var row struct{ ID int64 }
			if err := json.Unmarshal([]byte(line), &row); err != nil || row.ID != int64(k) {
				t.Fatalf("scan through node %d: row %d is %s (%v)", i+1, k, line, err)
			}
		}
	}
}

// TestClusterLakeIcebergThroughTheBinary: three processes share a lake
// directory; the leaders of a 6-bucket lake table, spread over them,
// commit to one Iceberg table at the same time, through a kill -9 and
// restart of a node, with a snapshot retention short enough that replaced
// files are deleted during the run. An engine reading the Iceberg table
// then gets every row written exactly once.
func TestClusterLakeIcebergThroughTheBinary(t *testing.T) {
	longMultiProcess(t)
	lake := t.TempDir()
	nodes := startJoinedCluster(t, fmt.Sprintf("[tiering]\nlake_dir = %q\nlake_snapshot_retention = \"2s\"\n", lake))
	mustCLI(t, nodes[0].client, "", "db", "create", "ice")
	mustCLI(t, nodes[0].client, "", "table", "create", "ice.t", "--schema", "id BIGINT NOT NULL, s STRING", "--buckets", "6",
		"--set", "table.replication.factor=3", "--set", "table.datalake.enabled=true", "--set", "table.datalake.freshness=1s")
	rows := func(from, to int) string {
		var in strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&in, "{\"id\":%d,\"s\":\"row %d\"}\n", i, i)
		}
		return in.String()
	}
	const rounds, perRound = 6, 1000
	for r := range rounds {
		// Appends go through a live node; the client retries through the
		// elections that follow the kill (same writer id and sequence, so
		// nothing is stored twice).
		addr := nodes[r%3].client
		if r == 4 {
			addr = nodes[0].client // nodes[1] is down in round 4
		}
		if r == 3 {
			// A node leading some buckets goes mid-run; the round waits
			// until its buckets have new leaders.
			nodes[1].p.kill()
			waitFor(t, 30*time.Second, func() error {
				var layout struct {
					Buckets []struct {
						Leader int `json:"leader"`
					} `json:"buckets"`
				}
				if err := call(context.Background(), addr, "AdminService/GetTableLayout", map[string]any{"table": "ice.t"}, &layout); err != nil {
					return err
				}
				for b, l := range layout.Buckets {
					if l.Leader == 0 || l.Leader == 2 {
						return fmt.Errorf("bucket %d led by node %d", b, l.Leader)
					}
				}
				return nil
			})
		}
		mustCLI(t, addr, rows(r*perRound, (r+1)*perRound), "append", "ice.t", "--batch", "100")
		if r == 4 {
			nodes[1].start(t)
		}
		time.Sleep(700 * time.Millisecond) // a lake pass or so between rounds
	}
	want := rounds * perRound
	waitFor(t, 60*time.Second, func() error {
		ids, err := icebergIDs(lake, "ice", "t")
		if err != nil {
			return err
		}
		if len(ids) != want {
			return fmt.Errorf("Iceberg table ice.t has %d rows, want %d", len(ids), want)
		}
		for i, id := range ids {
			if id != int64(i) {
				t.Fatalf("Iceberg table ice.t: row %d has id %d: a row twice or missing", i, id)
			}
		}
		return nil
	})
}

// startJoinedCluster starts three processes sharing the config file
// config: node 1 serves, nodes 2 and 3 join it.
func startJoinedCluster(t *testing.T, config string) []*clusterNode {
	t.Helper()
	nodes := joinedCluster(t, config)
	for _, n := range nodes {
		n.start(t)
	}
	return nodes
}

// joinedCluster is startJoinedCluster's three nodes, not started.
func joinedCluster(t *testing.T, config string) []*clusterNode {
	t.Helper()
	base := t.TempDir()
	path := filepath.Join(base, "fluss.toml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		nodes[i] = &clusterNode{dir: filepath.Join(base, fmt.Sprint(i+1)), client: nodetest.FreeAddr(), peer: nodetest.FreeAddr(), gossip: nodetest.FreeAddr(), config: path}
		if i > 0 {
			nodes[i].join = []string{nodes[0].peer}
		}
	}
	return nodes
}
