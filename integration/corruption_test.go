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
