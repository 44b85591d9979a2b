package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// writeGroupLog gives the bucket dir of dataDir a raft log whose only
// configuration is servers (ids are node ids), as a replica's would be.
func writeGroupLog(t *testing.T, dataDir string, b raftmeta.BucketID, servers ...raft.Server) {
	t.Helper()
	lg, err := logstore.Open(logstore.Options{Dir: filepath.Join(bucketPath(dataDir, b), "log"), OffsetFunc: replica.EntryOffsets})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: servers})
	if err := lg.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: conf}, {Index: 2, Term: 2, Type: raft.LogNoop}}); err != nil {
		t.Fatal(err)
	}
	if err := lg.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
}

func srv(id string, s raft.ServerSuffrage) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress("addr-" + id), Suffrage: s}
}

// TestRecoverDataDir: on node 4's data directory, with nodes 2 and 3
// lost, a bucket whose one surviving voter is node 4 is forced to it, a
// non-voting copy beside the survivor node 1 is set aside (and counts as
// reset: it must not bootstrap), a bucket whose majority survives is left,
// and a dry run changes nothing.
func TestRecoverDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "node.id"), []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	forced := raftmeta.BucketID{TableID: 1, Bucket: 0}
	aside := raftmeta.BucketID{TableID: 1, Bucket: 1}
	kept := raftmeta.BucketID{TableID: 2, PartitionID: 5, Bucket: 0}
	writeGroupLog(t, dir, forced, srv("4", raft.Voter), srv("2", raft.Voter), srv("3", raft.Voter))
	writeGroupLog(t, dir, aside, srv("1", raft.Voter), srv("2", raft.Voter), srv("3", raft.Voter), srv("4", raft.Nonvoter))
	writeGroupLog(t, dir, kept, srv("4", raft.Voter), srv("5", raft.Voter), srv("3", raft.Voter))
	cfg := Default()
	cfg.DataDir = dir
	lost := []raftmeta.NodeID{2, 3}

	var out bytes.Buffer
	if err := Recover(cfg, []raftmeta.NodeID{4}, false, &out); err == nil || !strings.Contains(err.Error(), "node 4 is this node") {
		t.Fatalf("recover naming this node lost: %v", err)
	}
	if err := Recover(cfg, lost, true, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "dry run") || !strings.Contains(s, "buckets: 1 forced, 1 set aside, 0 not recoverable here, 1 need nothing") {
		t.Fatalf("dry run printed:\n%s", s)
	}
	if !dirExists(bucketPath(dir, aside)) {
		t.Fatal("the dry run set a copy aside")
	}
	again, err := replica.ForceSoleVoter(bucketPath(dir, forced), "4", func(id raft.ServerID) bool { return id == "2" || id == "3" }, true, nil)
	if err != nil || again.Outcome != replica.Forced {
		t.Fatalf("after the dry run the bucket is no longer to force: %+v, %v", again, err)
	}

	out.Reset()
	if err := Recover(cfg, lost, false, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "metadata group: no metadata state") || !strings.Contains(s, "buckets: 1 forced, 1 set aside, 0 not recoverable here, 1 need nothing, 0 failed") ||
		!strings.Contains(s, "forced to node 4 alone") || !strings.Contains(s, setAsideSuffix) {
		t.Fatalf("recover printed:\n%s", s)
	}
	if dirExists(bucketPath(dir, aside)) {
		t.Fatal("the non-voting copy is still in place")
	}
	n := &Node{cfg: cfg}
	if !n.wasReset(aside) || n.wasReset(forced) {
		t.Fatal("a copy set aside by recovery must count as reset, the forced one not")
	}
	out.Reset()
	if err := Recover(cfg, lost, false, &out); err != nil || !strings.Contains(out.String(), "buckets: 0 forced, 0 set aside, 0 not recoverable here, 2 need nothing") {
		t.Fatalf("a second run: %v\n%s", err, out.String())
	}
}

// TestRecoverGoesOnPastADamagedBucket: a bucket whose log does not open is
// reported and the command fails, but the other buckets are recovered.
func TestRecoverGoesOnPastADamagedBucket(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "node.id"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := raftmeta.BucketID{TableID: 1, Bucket: 0}
	fine := raftmeta.BucketID{TableID: 1, Bucket: 1}
	for _, b := range []raftmeta.BucketID{damaged, fine} {
		writeGroupLog(t, dir, b, srv("1", raft.Voter), srv("2", raft.Voter), srv("3", raft.Voter))
	}
	segs, err := filepath.Glob(filepath.Join(bucketPath(dir, damaged), "log", "*.log"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v, %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/4] ^= 0x10 // inside the first entry, the second one intact: damage, not a torn tail
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.DataDir = dir
	var out bytes.Buffer
	err = Recover(cfg, []raftmeta.NodeID{2, 3}, false, &out)
	if err == nil || !strings.Contains(err.Error(), "1 buckets failed") ||
		!strings.Contains(out.String(), "bucket "+damaged.String()+": FAILED") || !strings.Contains(out.String(), "buckets: 1 forced, 0 set aside, 0 not recoverable here, 0 need nothing, 1 failed") {
		t.Fatalf("recover: %v\n%s", err, out.String())
	}
}
