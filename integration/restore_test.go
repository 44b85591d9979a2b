package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRestoreBucketThatLostEveryReplica: three processes share a remote
// directory. A one-replica log table's bucket tiers its closed segments
// there; then its node is kill -9'ed and its disk is gone, so the bucket
// has no replica left. `cluster restore-bucket` is refused while the node
// is within its grace period and for a primary-key table; once the node is
// down past it, the bucket is restored on a live node: every row the
// remote log held reads from offset 0, in order, new rows continue at the
// start offset it printed, a restart of the new replica's node keeps
// both, and the lost node, brought back with its old disk after all, sets
// its copy of the old group aside and serves the new one.
func TestRestoreBucketThatLostEveryReplica(t *testing.T) {
	longMultiProcess(t)
	remote := t.TempDir()
	nodes := startJoinedCluster(t, fmt.Sprintf("[cluster]\ndead_node_grace = \"3s\"\n[storage]\nsegment_bytes = 1048576\n\n"+
		"[tiering]\nremote_dir = %q\ninterval = \"100ms\"\nlocal_segments = 1\nkv_snapshot_interval = \"500ms\"\n", remote))
	mustCLI(t, nodes[0].client, "", "db", "create", "rb")
	mustCLI(t, nodes[0].client, "", "table", "create", "rb.t", "--schema", "id BIGINT NOT NULL, s STRING", "--buckets", "1",
		"--set", "table.log.arrow.compression.type=NONE", "--set", "table.replication.factor=1")
	// A one-replica primary-key table with a bucket on every node.
	mustCLI(t, nodes[0].client, "", "table", "create", "rb.pk", "--schema", "id BIGINT NOT NULL, s STRING", "--primary-key", "id", "--buckets", "3",
		"--set", "table.replication.factor=1")

	var layout struct {
		Buckets []struct {
			Leader   int   `json:"leader"`
			Replicas []int `json:"replicas"`
		} `json:"buckets"`
	}
	waitFor(t, 30*time.Second, func() error {
		if err := callOnce(nodes[0].client, "AdminService/GetTableLayout", map[string]any{"table": "rb.t"}, &layout); err != nil {
			return err
		}
		if len(layout.Buckets) != 1 || layout.Buckets[0].Leader == 0 {
			return fmt.Errorf("no leader yet: %+v", layout)
		}
		return nil
	})
	victim := nodes[layout.Buckets[0].Leader-1]
	other := nodes[layout.Buckets[0].Leader%3]
	const rows = 3000
	mustCLI(t, other.client, bigRows(rows, 21), "append", "rb.t", "--batch", "100")
	// Rows of the primary-key table, updated once, so its KV state is not
	// its first changelog.
	pkRows := func(from, to int, v string) []map[string]any {
		var out []map[string]any
		for i := from; i < to; i++ {
			out = append(out, map[string]any{"id": i, "s": fmt.Sprintf("%s%d", v, i)})
		}
		return out
	}
	mustCall(t, other.client, "WriteService/Upsert", map[string]any{"table": "rb.pk", "rows": pkRows(0, 300, "a")}, nil)
	mustCall(t, other.client, "WriteService/Upsert", map[string]any{"table": "rb.pk", "rows": pkRows(100, 400, "b")}, nil)
	mustCall(t, other.client, "WriteService/Delete", map[string]any{"table": "rb.pk", "keys": []map[string]any{{"id": 7}}}, nil)
	var pkLayout struct {
		Buckets []struct {
			Bucket int `json:"bucket"`
			Leader int `json:"leader"`
		} `json:"buckets"`
	}
	mustCall(t, other.client, "AdminService/GetTableLayout", map[string]any{"table": "rb.pk"}, &pkLayout)
	pkBucket := -1
	for _, b := range pkLayout.Buckets {
		if b.Leader == layout.Buckets[0].Leader {
			pkBucket = b.Bucket
		}
	}
	if pkBucket < 0 {
		t.Fatalf("no bucket of rb.pk on node %d: %+v", layout.Buckets[0].Leader, pkLayout)
	}
	// Its leader uploads a KV snapshot that reaches its high watermark.
	var offs struct {
		Offsets []struct {
			Bucket int `json:"bucket"`
			Offset any `json:"offset"`
		} `json:"offsets"`
	}
	mustCall(t, other.client, "AdminService/ListOffsets", map[string]any{"table": "rb.pk", "spec": "LATEST"}, &offs)
	var pkEnd int64
	for _, o := range offs.Offsets {
		if o.Bucket == pkBucket {
			pkEnd = jsonInt(o.Offset)
		}
	}
	kvSnaps := filepath.Join(remote, "t*", "p*", fmt.Sprintf("b%d", pkBucket), "kv-*.snap")
	waitFor(t, 30*time.Second, func() error {
		m, _ := filepath.Glob(kvSnaps)
		for _, s := range m {
			if strings.HasSuffix(s, fmt.Sprintf("-%020d.snap", pkEnd)) {
				return nil
			}
		}
		return fmt.Errorf("no KV snapshot reaching offset %d of bucket %d in %v", pkEnd, pkBucket, m)
	})
	tiered := filepath.Join(remote, "t*", "p*", "b0", "*.log")
	waitFor(t, 30*time.Second, func() error {
		if m, _ := filepath.Glob(tiered); len(m) < 4 {
			return fmt.Errorf("%d remote segments, want >= 4", len(m))
		}
		return nil
	})
	restore := func(table string) cliResult {
		return runCLI(t, other.client, "", "cluster", "restore-bucket", table, "--bucket", "0")
	}
	if r := restore("rb.t"); r.code == 0 || !strings.Contains(r.stderr, "still has its replica on node") {
		t.Fatalf("restore of a bucket whose replica is up: %v\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, other.client, "", "cluster", "restore-bucket", "rb.t"); r.code == 0 || !strings.Contains(r.stderr, "--bucket is required") {
		t.Fatalf("restore without --bucket: %v\n%s%s", r.code, r.stdout, r.stderr)
	}

	victim.p.kill()
	// Its disk is gone (kept aside, to bring the node back with it below).
	lostDisk := victim.dir + ".lost"
	if err := os.Rename(victim.dir, lostDisk); err != nil {
		t.Fatal(err)
	}
	// The end of what the remote log holds, now that the only replica,
	// which uploaded to it, is gone (segment files are named
	// <first offset>-<next offset>_<max timestamp>.log): the restored log
	// starts there.
	segs, _ := filepath.Glob(tiered)
	remoteEnd := int64(0)
	for _, s := range segs {
		_, rest, _ := strings.Cut(filepath.Base(s), "-")
		nextText, _, _ := strings.Cut(rest, "_")
		next, err := strconv.ParseInt(nextText, 10, 64)
		if err != nil {
			t.Fatalf("remote segment %s: %v", s, err)
		}
		remoteEnd = max(remoteEnd, next)
	}
	if remoteEnd <= 0 || remoteEnd >= rows {
		t.Fatalf("the remote log ends at %d, want inside (0, %d): the last segment is still local", remoteEnd, rows)
	}

	// Once the node is down past the grace, cluster status names the loss.
	waitFor(t, 60*time.Second, func() error {
		r := runCLI(t, other.client, "", "cluster", "status")
		if !strings.Contains(r.stdout, "2 of them lost every replica") {
			return fmt.Errorf("cluster status does not count the lost bucket:\n%s%s", r.stdout, r.stderr)
		}
		return nil
	})
	var out string
	waitFor(t, 60*time.Second, func() error {
		r := restore("rb.t")
		if r.code != 0 {
			return fmt.Errorf("restore-bucket: %v\n%s", r.code, r.stderr)
		}
		out = r.stdout
		return nil
	})
	t.Logf("restore-bucket printed: %s", out)
	m := regexp.MustCompile(`restored \(generation 1\) on node\(s\) \[(\d+)\]: its log continues at offset (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("restore-bucket printed %q", out)
	}
	if start, _ := strconv.ParseInt(m[2], 10, 64); start != remoteEnd {
		t.Fatalf("restored at offset %d, want the remote log's end %d", start, remoteEnd)
	}
	holder, _ := strconv.Atoi(m[1])
	if holder == layout.Buckets[0].Leader {
		t.Fatalf("restored on the lost node %d", holder)
	}
	// Every row the remote log held, then new rows at the start offset.
	waitFor(t, 30*time.Second, func() error {
		return callOnce(other.client, "WriteService/Append", map[string]any{"table": "rb.t", "bucket": 0,
			"rows": []map[string]any{{"id": remoteEnd, "s": "after"}}}, nil)
	})
	mustCLI(t, other.client, fmt.Sprintf("{\"id\":%d,\"s\":\"after\"}\n", remoteEnd+1), "append", "rb.t")
	scanFromEarliest(t, other.client, "rb.t", int(remoteEnd)+2)
	// The primary-key bucket: its rows as they were, from the KV snapshot.
	r := runCLI(t, other.client, "", "cluster", "restore-bucket", "rb.pk", "--bucket", fmt.Sprint(pkBucket))
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("its log continues at offset %d", pkEnd)) {
		t.Fatalf("restore of the primary-key bucket (high watermark %d): %v\n%s%s", pkEnd, r.code, r.stdout, r.stderr)
	}
	var keys []map[string]any
	for i := range 400 {
		keys = append(keys, map[string]any{"id": i})
	}
	waitFor(t, 30*time.Second, func() error {
		var lookup struct {
			Rows []json.RawMessage `json:"rows"`
		}
		if err := callOnce(other.client, "ReadService/Lookup", map[string]any{"table": "rb.pk", "keys": keys}, &lookup); err != nil {
			return err
		}
		for i, row := range lookup.Rows {
			want := fmt.Sprintf(`"s":"a%d"`, i)
			switch {
			case i == 7:
				want = "null"
			case i >= 100:
				want = fmt.Sprintf(`"s":"b%d"`, i)
			}
			if !strings.Contains(string(row), want) {
				return fmt.Errorf("row %d after the restore: %s, want %s", i, row, want)
			}
		}
		return nil
	})
	if st := mustCLI(t, other.client, "", "cluster", "status").stdout; strings.Contains(st, "lost every replica") {
		t.Fatalf("cluster status after the restores:\n%s", st)
	}

	restarted := nodes[holder-1]
	restarted.p.kill()
	restarted.start(t)
	waitFor(t, 30*time.Second, func() error {
		return callOnce(restarted.client, "WriteService/Append", map[string]any{"table": "rb.t", "bucket": 0,
			"rows": []map[string]any{{"id": remoteEnd + 2, "s": "after"}}}, nil)
	})
	scanFromEarliest(t, restarted.client, "rb.t", int(remoteEnd)+3)
	if r := restore("rb.t"); r.code == 0 || !strings.Contains(r.stderr, "still has its replica on node") {
		t.Fatalf("a second restore of the restored bucket: %v\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The lost node comes back with its old disk after all: it sets its
	// copy of the old group aside instead of serving it, and serves the
	// restored bucket through the new group.
	if err := os.Rename(lostDisk, victim.dir); err != nil {
		t.Fatal(err)
	}
	victim.start(t)
	waitFor(t, 30*time.Second, func() error {
		return callOnce(victim.client, "WriteService/Append", map[string]any{"table": "rb.t", "bucket": 0,
			"rows": []map[string]any{{"id": remoteEnd + 3, "s": "after"}}}, nil)
	})
	scanFromEarliest(t, victim.client, "rb.t", int(remoteEnd)+4)
	if aside, _ := filepath.Glob(filepath.Join(victim.dir, "buckets", "*", "*", "0.old-generation-*")); len(aside) != 1 {
		t.Fatalf("the returning node set aside %v, want its copy of the old group", aside)
	}
}
