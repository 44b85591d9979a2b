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
	if testing.Short() {
		t.Skip("multi-process test")
	}
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
// directory aside, and the replica rejoins empty, copies the log and is
// in sync again; no acknowledged row is lost.
func TestDamagedFollowerIsRebuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	nodes := startJoinedCluster(t, "[raft]\nreplica_max_lag = \"8s\"\n")
	addr := nodes[0].client
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "d"}, nil)
	cols := []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}, {"name": "s", "type": "STRING"}}
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{"table": "d.log", "schema": map[string]any{"columns": cols},
		"bucketCount": 1, "properties": map[string]string{"table.replication.factor": "3"}}, nil)
	created := time.Now()
	var acked []int
	next := 0
	for range 20 {
		waitFor(t, 20*time.Second, func() error { return appendRows(addr, "d.log", 0, 64, &next, &acked) })
	}
	var lay inSyncLayout
	mustCall(t, addr, "AdminService/GetTableLayout", map[string]any{"table": "d.log"}, &lay)
	f := nodes[0] // a follower: not the leader's node
	if lay.Buckets[0].Leader == 1 {
		f = nodes[1]
	}
	waitFor(t, 30*time.Second, func() error { // the follower holds every entry before it stops
		if a, b := metric(t, f.client, "fluss_log_size_bytes"), metric(t, nodes[2].client, "fluss_log_size_bytes"); a != b {
			return fmt.Errorf("follower log %s bytes, node 3 %s", a, b)
		}
		return nil
	})
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
		waitFor(t, 20*time.Second, func() error { return appendRows(addr, "d.log", 0, 64, &next, &acked) })
	}

	// The leader counts unheard followers in only while it has led for
	// less than replica_max_lag.
	time.Sleep(time.Until(created.Add(9 * time.Second)))
	waitFor(t, 60*time.Second, func() error { return checkInSync(addr, "d.log", []int{1, 2, 3}) })
	waitFor(t, 30*time.Second, func() error {
		if a, b := metric(t, f.client, "fluss_log_size_bytes"), metric(t, nodes[2].client, "fluss_log_size_bytes"); a != b {
			return fmt.Errorf("rebuilt follower log %s bytes, node 3 %s", a, b)
		}
		return nil
	})
	aside, _ := filepath.Glob(filepath.Join(f.dir, "buckets", "*", "*", "*.damaged-*"))
	if len(aside) != 1 {
		t.Errorf("want the damaged replica kept aside once, got %v", aside)
	}
	if !strings.Contains(f.p.logText(), "bucket replica damaged: removed from its group and set aside") {
		t.Errorf("the follower's log does not say it set the damaged replica aside")
	}
	checkIDs(t, addr, "d.log", acked)
}
