package node

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluss-node/fluss-node/raftmeta"
)

// TestGenerations: a replica directory of an earlier generation of its
// bucket's group, with what damage and recovery set aside of it, is set
// aside as old-generation (no longer counting as reset, so the new group's
// replica bootstraps), and the new directory carries its generation; a
// directory of the current generation is left alone, and generation 0
// needs nothing.
func TestGenerations(t *testing.T) {
	cfg := Default()
	cfg.DataDir = t.TempDir()
	n := &Node{cfg: cfg, id: 4, logger: slog.New(slog.DiscardHandler)}
	b := raftmeta.BucketID{TableID: 7, PartitionID: raftmeta.NoPartition, Bucket: 3}
	dir := n.bucketDir(b)
	for _, d := range []string{dir + "/log", dir + damagedSuffix + "100", dir + setAsideSuffix + "200", n.bucketDir(raftmeta.BucketID{TableID: 7, PartitionID: raftmeta.NoPartition, Bucket: 30})} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := raftmeta.Assignment{BucketID: b, Replicas: []raftmeta.NodeID{4}}
	if n.oldGeneration(a, nil) {
		t.Fatal("generation 0 taken as old")
	}
	if err := n.prepareGeneration(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "log")); err != nil || !n.wasReset(b) {
		t.Fatalf("generation 0 changed the directory (%v) or its set-aside siblings", err)
	}

	a.Generation, a.StartOffset = 1, 500
	if !n.oldGeneration(a, nil) {
		t.Fatal("a directory without a generation file is not taken as older than generation 1")
	}
	if err := n.prepareGeneration(a); err != nil {
		t.Fatal(err)
	}
	if g, err := readGeneration(dir); err != nil || g != 1 {
		t.Fatalf("generation file: %d %v, want 1", g, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "log")); !os.IsNotExist(err) {
		t.Fatalf("the earlier generation's log is still in the directory: %v", err)
	}
	if n.wasReset(b) {
		t.Fatal("the earlier generation's set-aside copies still keep the new replica from bootstrapping")
	}
	aside, _ := filepath.Glob(dir + oldGenerationSuffix + "*")
	var kinds []string
	for _, p := range aside {
		kinds = append(kinds, strings.TrimPrefix(p, dir))
	}
	if len(aside) != 3 || !strings.Contains(strings.Join(kinds, " "), damagedSuffix) || !strings.Contains(strings.Join(kinds, " "), setAsideSuffix) {
		t.Fatalf("set aside: %v, want the directory and its two set-aside copies", kinds)
	}
	if _, err := os.Stat(n.bucketDir(raftmeta.BucketID{TableID: 7, PartitionID: raftmeta.NoPartition, Bucket: 30})); err != nil {
		t.Fatalf("bucket 30, another bucket, was touched: %v", err)
	}
	if n.oldGeneration(a, nil) {
		t.Fatal("the prepared directory is taken as old")
	}
	// Again: this generation's directory stays as it is.
	if err := os.WriteFile(filepath.Join(dir, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := n.prepareGeneration(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "marker")); err != nil {
		t.Fatalf("a directory of the current generation was set aside: %v", err)
	}

	// A copy of this generation that damage set aside stays, and still
	// keeps the replica from bootstrapping the group again.
	if err := os.Rename(dir, dir+damagedSuffix+"300"); err != nil {
		t.Fatal(err)
	}
	if err := n.prepareGeneration(a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + damagedSuffix + "300"); err != nil || !n.wasReset(b) {
		t.Fatalf("a damaged copy of the current generation was set aside as old (%v), or no longer counts as reset", err)
	}
	if g, err := readGeneration(dir); err != nil || g != 1 {
		t.Fatalf("generation file after the damaged copy: %d %v, want 1", g, err)
	}

	// A node the restored bucket is not assigned to sets its copy of an
	// earlier generation aside and opens nothing.
	a.Generation, a.Replicas = 2, []raftmeta.NodeID{5}
	if !n.oldGeneration(a, nil) {
		t.Fatal("generation 1 not taken as older than 2")
	}
	if n.leaveGeneration(a, nil) {
		t.Fatal("leaveGeneration reports the bucket assigned here")
	}
	if n.hasBucketDir(b) {
		t.Fatal("the copy of generation 1 was not set aside")
	}
	if aside, _ := filepath.Glob(dir + oldGenerationSuffix + "*"); len(aside) != 5 {
		t.Fatalf("%d entries set aside, want 5 (with the new directory and its damaged copy): %v", len(aside), aside)
	}
}
