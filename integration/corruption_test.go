package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A segment damaged in the middle (a byte the disk changed, with
// acknowledged entries after it) is not cut back at the damage on restart:
// the bucket stays unavailable with an error that says why, the file is
// left as it was, and once the operator restores the file the bucket opens
// with every row.
func TestDamagedSegmentIsNotTruncated(t *testing.T) {
	longMultiProcess(t)
	data := t.TempDir()
	p := startNode(t, data)
	createDiskTables(t, p.addr)
	next := 0
	var acked []int
	for range 20 {
		waitFor(t, 20*time.Second, func() error { return appendRows(p.addr, "d.log", 0, 64, &next, &acked) })
	}
	p.stop(t)

	segs, err := filepath.Glob(filepath.Join(data, "buckets", "*", "*", "*", "log", "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment under %s: %v", data, err)
	}
	var seg string
	var orig []byte
	for _, s := range segs { // the log table's bucket holds the big one
		if b, _ := os.ReadFile(s); len(b) > len(orig) {
			seg, orig = s, b
		}
	}
	damaged := bytes.Clone(orig)
	damaged[len(damaged)/2] ^= 0x10
	if err := os.WriteFile(seg, damaged, 0o644); err != nil {
		t.Fatal(err)
	}

	p = startNode(t, data)
	waitFor(t, 20*time.Second, func() error { // the catalog is loaded; the bucket is not
		err := callOnce(p.addr, "WriteService/Append", map[string]any{"table": "d.log", "bucket": 0, "rows": diskRows(next, 1)}, nil)
		if err == nil {
			t.Fatal("append to a bucket whose segment is damaged succeeded")
		}
		var ce *connectErr
		if errors.As(err, &ce) && ce.Code == "unavailable" && strings.Contains(ce.Message, "cannot be opened") {
			return nil
		}
		return err
	})
	err = callOnce(p.addr, "ReadService/Fetch", map[string]any{"table": "d.log", "bucket": 0, "offset": 0}, nil)
	wantCode(t, "fetch from the damaged bucket", err, "unavailable", "cannot be opened", "damaged, not torn", "truncate the file to")
	if b, _ := os.ReadFile(seg); !bytes.Equal(b, damaged) {
		t.Fatalf("the damaged segment was changed on open (%d bytes, was %d)", len(b), len(damaged))
	}
	offline := func(want int) { // the node's other replicas may still be opening: more at first
		t.Helper()
		waitFor(t, 20*time.Second, func() error {
			if m := metric(t, p.addr, "fluss_bucket_replicas_offline"); m != fmt.Sprint(want) {
				return fmt.Errorf("fluss_bucket_replicas_offline = %s, want %d", m, want)
			}
			if _, off, err := clusterHealth(p.addr); err != nil || off[1] != want {
				return fmt.Errorf("DescribeCluster: node 1 offline replicas %v (%v), want %d", off, err, want)
			}
			return nil
		})
	}
	offline(1)

	if err := os.WriteFile(seg, orig, 0o644); err != nil { // restored from a copy
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() error { // the node retries the open
		return callOnce(p.addr, "ReadService/Fetch", map[string]any{"table": "d.log", "bucket": 0, "offset": 0}, nil)
	})
	checkIDs(t, p.addr, "d.log", acked)
	offline(0)
}

// A follower whose segment is damaged, in a bucket of three replicas, is
// rebuilt from the others instead of staying out: on restart its node has
// the leader remove the replica from the group, sets the damaged
// directory aside, and the replica rejoins empty, copies the log (and, for
// a primary-key table, rebuilds its KV state) and is in sync again. Then
// it is made the leader (the other two nodes drained) and serves every
// acknowledged row.
func TestDamagedFollowerIsRebuilt(t *testing.T) {
	longMultiProcess(t)
	t.Run("log", func(t *testing.T) { testDamagedFollowerIsRebuilt(t, false) })
	t.Run("primary key", func(t *testing.T) { testDamagedFollowerIsRebuilt(t, true) })
}

func testDamagedFollowerIsRebuilt(t *testing.T, pk bool) {
	nodes := startJoinedCluster(t, "[raft]\nreplica_max_lag = \"8s\"\n")
	addr := nodes[0].client
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "d"}, nil)
	schema := map[string]any{"columns": []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}, {"name": "s", "type": "STRING"}}}
	if pk {
		schema["primaryKey"] = []string{"id"}
	}
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{"table": "d.t", "schema": schema,
		"bucketCount": 1, "properties": map[string]string{"table.replication.factor": "3"}}, nil)
	created := time.Now()
	var acked []int
	next := 0
	write := func() error {
		if !pk {
			return appendRows(addr, "d.t", 0, 64, &next, &acked)
		}
		if err := callOnce(addr, "WriteService/Upsert", map[string]any{"table": "d.t", "rows": diskRows(next, 64)}, nil); err != nil {
			return err
		}
		for i := range 64 {
			acked = append(acked, next+i)
		}
		next += 64
		return nil
	}
	for range 20 {
		waitFor(t, 20*time.Second, write)
	}
	var lay inSyncLayout
	mustCall(t, addr, "AdminService/GetTableLayout", map[string]any{"table": "d.t"}, &lay)
	fi := 0 // a follower: not the leader's node
	if lay.Buckets[0].Leader == 1 {
		fi = 1
	}
	f := nodes[fi]
	sameLog := func() error {
		if a, b := metric(t, f.client, "fluss_log_size_bytes"), metric(t, nodes[2].client, "fluss_log_size_bytes"); a != b {
			return fmt.Errorf("follower log %s bytes, node 3 %s", a, b)
		}
		return nil
	}
	waitFor(t, 30*time.Second, sameLog) // it holds every entry before it stops
	f.p.stop(t)
	segs, _ := filepath.Glob(filepath.Join(f.dir, "buckets", "*", "*", "*", "log", "*.log"))
	if len(segs) != 1 {
		t.Fatalf("want one segment of the one bucket in %s, got %v", f.dir, segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.start(t)
	for range 5 { // writes go on meanwhile
		waitFor(t, 20*time.Second, write)
	}

	// The leader counts unheard followers in only while it has led for
	// less than replica_max_lag.
	time.Sleep(time.Until(created.Add(9 * time.Second)))
	waitFor(t, 60*time.Second, func() error { return checkInSync(addr, "d.t", []int{1, 2, 3}) })
	waitFor(t, 30*time.Second, sameLog)
	aside, _ := filepath.Glob(filepath.Join(f.dir, "buckets", "*", "*", "*.damaged-*"))
	if len(aside) != 1 {
		t.Errorf("want the damaged replica kept aside once, got %v", aside)
	}
	if !strings.Contains(f.p.logText(), "bucket replica damaged: removed from its group and set aside") {
		t.Errorf("the follower's log does not say it set the damaged replica aside")
	}

	// The rebuilt replica leads and serves everything.
	for i := range nodes {
		if i != fi {
			mustCall(t, addr, "AdminService/DrainNode", map[string]any{"nodeId": i + 1}, nil)
		}
	}
	waitFor(t, 30*time.Second, func() error {
		mustCall(t, addr, "AdminService/GetTableLayout", map[string]any{"table": "d.t"}, &lay)
		if l := lay.Buckets[0].Leader; l != fi+1 {
			return fmt.Errorf("bucket led by node %d, want the rebuilt node %d", l, fi+1)
		}
		return nil
	})
	if !pk {
		checkIDs(t, addr, "d.t", acked)
		return
	}
	var res struct{ Rows []map[string]any }
	mustCall(t, addr, "ReadService/LimitScan", map[string]any{"table": "d.t", "bucket": 0, "limit": len(acked) + 1}, &res)
	want := map[int]string{}
	for _, r := range diskRows(0, next) {
		want[r["id"].(int)] = r["s"].(string)
	}
	if len(res.Rows) != len(acked) {
		t.Fatalf("the rebuilt leader holds %d rows, want the %d upserted", len(res.Rows), len(acked))
	}
	for _, r := range res.Rows {
		id := int(jsonInt(r["id"]))
		if s, ok := want[id]; !ok || r["s"] != s {
			t.Fatalf("the rebuilt leader holds row %d with %.20q..., want %.20q...", id, r["s"], s)
		}
		delete(want, id)
	}
}
