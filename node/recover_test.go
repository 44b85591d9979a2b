package node

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// writeGroupLog gives the bucket dir of dataDir a raft log whose only
// configuration is servers (ids are node ids), as a replica's would be:
// the configuration at index 1, then no-op entries of term 2 up to index
// 2, or last if given.
func writeGroupLog(t *testing.T, dataDir string, b raftmeta.BucketID, servers []raft.Server, last ...uint64) {
	t.Helper()
	lg, err := logstore.Open(logstore.Options{Dir: filepath.Join(bucketPath(dataDir, b), "log"), OffsetFunc: replica.EntryOffsets})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: servers})
	logs := []*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: conf}}
	end := uint64(2)
	if len(last) > 0 {
		end = max(end, last[0])
	}
	for i := uint64(2); i <= end; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogNoop})
	}
	if err := lg.StoreLogs(logs); err != nil {
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
	writeGroupLog(t, dir, forced, []raft.Server{srv("4", raft.Voter), srv("2", raft.Voter), srv("3", raft.Voter)})
	writeGroupLog(t, dir, aside, []raft.Server{srv("1", raft.Voter), srv("2", raft.Voter), srv("3", raft.Voter), srv("4", raft.Nonvoter)})
	writeGroupLog(t, dir, kept, []raft.Server{srv("4", raft.Voter), srv("5", raft.Voter), srv("3", raft.Voter)})
	cfg := Default()
	cfg.DataDir = dir
	lost := []raftmeta.NodeID{2, 3}

	var out bytes.Buffer
	if err := Recover(cfg, RecoverOptions{Lost: []raftmeta.NodeID{4}}, &out); err == nil || !strings.Contains(err.Error(), "node 4 is this node") {
		t.Fatalf("recover naming this node lost: %v", err)
	}
	if err := Recover(cfg, RecoverOptions{Lost: lost, DryRun: true}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "dry run") || !strings.Contains(s, "buckets: 1 forced, 1 set aside, 0 not recoverable here, 1 need nothing") {
		t.Fatalf("dry run printed:\n%s", s)
	}
	if !dirExists(bucketPath(dir, aside)) {
		t.Fatal("the dry run set a copy aside")
	}
	if ids, err := readFencedNodes(dir); err != nil || ids != nil || !strings.Contains(out.String(), "fenced nodes: would refuse the raft requests of [2 3]") {
		t.Fatalf("the dry run fenced %v (%v), printed:\n%s", ids, err, out.String())
	}
	again, err := replica.ForceSoleVoter(bucketPath(dir, forced), "4", replica.Recovery{Lost: func(id raft.ServerID) bool { return id == "2" || id == "3" }, DryRun: true})
	if err != nil || again.Outcome != replica.Forced {
		t.Fatalf("after the dry run the bucket is no longer to force: %+v, %v", again, err)
	}

	out.Reset()
	if err := Recover(cfg, RecoverOptions{Lost: lost}, &out); err != nil {
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
	if ids, err := readFencedNodes(dir); err != nil || fmt.Sprint(ids) != "[2 3]" || !strings.Contains(s, "fenced nodes: [2 3]") {
		t.Fatalf("recover fenced %v (%v), printed:\n%s", ids, err, s)
	}
	n := &Node{cfg: cfg}
	if !n.wasReset(aside) || n.wasReset(forced) {
		t.Fatal("a copy set aside by recovery must count as reset, the forced one not")
	}
	out.Reset()
	if err := Recover(cfg, RecoverOptions{Lost: lost}, &out); err != nil || !strings.Contains(out.String(), "buckets: 0 forced, 0 set aside, 0 not recoverable here, 2 need nothing") {
		t.Fatalf("a second run: %v\n%s", err, out.String())
	}
	// A later recovery from the loss of another node adds to the fence.
	if err := Recover(cfg, RecoverOptions{Lost: []raftmeta.NodeID{5, 2}}, &out); err != nil {
		t.Fatal(err)
	}
	if ids, err := readFencedNodes(dir); err != nil || fmt.Sprint(ids) != "[2 3 5]" {
		t.Fatalf("after a second recovery the fence is %v (%v), want [2 3 5]", ids, err)
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
		writeGroupLog(t, dir, b, []raft.Server{srv("1", raft.Voter), srv("2", raft.Voter), srv("3", raft.Voter)})
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
	err = Recover(cfg, RecoverOptions{Lost: []raftmeta.NodeID{2, 3}}, &out)
	if err == nil || !strings.Contains(err.Error(), "1 buckets failed") ||
		!strings.Contains(out.String(), "bucket "+damaged.String()+": FAILED") || !strings.Contains(out.String(), "buckets: 1 forced, 0 set aside, 0 not recoverable here, 0 need nothing, 1 failed") {
		t.Fatalf("recover: %v\n%s", err, out.String())
	}
}

// TestRecoverWithPositions: a bucket of five replicas loses three; its
// two surviving voters' reports give their positions, and with them the
// one whose log is longer is forced while the other is left to follow.
func TestRecoverWithPositions(t *testing.T) {
	five := []raft.Server{srv("1", raft.Voter), srv("2", raft.Voter), srv("3", raft.Voter), srv("4", raft.Voter), srv("5", raft.Voter)}
	b := raftmeta.BucketID{TableID: 7, Bucket: 2}
	dirs := map[raftmeta.NodeID]string{}
	for id, last := range map[raftmeta.NodeID]uint64{1: 4, 5: 6} {
		dirs[id] = t.TempDir()
		if err := os.WriteFile(filepath.Join(dirs[id], "node.id"), []byte(strconv.Itoa(int(id))+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		writeGroupLog(t, dirs[id], b, five, last)
	}
	lost := []raftmeta.NodeID{2, 3, 4}
	recover := func(id raftmeta.NodeID, o RecoverOptions) (string, error) {
		cfg := Default()
		cfg.DataDir = dirs[id]
		o.Lost = lost
		var out bytes.Buffer
		err := Recover(cfg, o, &out)
		return out.String(), err
	}
	var reports string
	for _, id := range []raftmeta.NodeID{1, 5} {
		out, err := recover(id, RecoverOptions{DryRun: true})
		want := fmt.Sprintf("position table=7 partition=0 bucket=2 node=%d term=2 index=%d", id, map[raftmeta.NodeID]int{1: 4, 5: 6}[id])
		if err != nil || !strings.Contains(out, "NOT recovered") || !strings.Contains(out, want) {
			t.Fatalf("node %d's dry run: %v\n%s", id, err, out)
		}
		reports += out
	}
	// Without node 5's report, node 1 cannot tell.
	if out, err := recover(1, RecoverOptions{Positions: strings.NewReader(reports[:strings.Index(reports, "node 5,")])}); err != nil || !strings.Contains(out, "NOT recovered") {
		t.Fatalf("node 1 with its own position only: %v\n%s", err, out)
	}
	out, err := recover(1, RecoverOptions{Positions: strings.NewReader(reports)})
	if err != nil || !strings.Contains(out, "another survivor's copy is forced") {
		t.Fatalf("node 1 with both positions: %v\n%s", err, out)
	}
	out, err = recover(5, RecoverOptions{Positions: strings.NewReader(reports)})
	if err != nil || !strings.Contains(out, "forced to node 5 alone (entry 7, term 3)") {
		t.Fatalf("node 5 with both positions: %v\n%s", err, out)
	}
	for _, bad := range []string{"position table=7 partition=0 bucket=2 node=1 term=2", "position table=7 partition=0 bucket=2 node=x term=2 index=1",
		"position table=7 partition=0 bucket=2 node=0 term=2 index=1", "position table=7 partition=0 bucket=2 node=1 term=2 index=1 index=2",
		"position table=7 partition=0 bucket=2 node=1 term=2 index=1 color=3"} {
		if _, err := readPositions(strings.NewReader("node 1\n" + bad + "\n")); err == nil {
			t.Errorf("positions line %q accepted", bad)
		}
	}
}

// FuzzReadPositions: a positions file is read without panicking, and what
// it accepts names real nodes.
func FuzzReadPositions(f *testing.F) {
	f.Add("node 1, lost nodes [2 3]\nposition table=7 partition=0 bucket=2 node=1 term=2 index=4\n")
	f.Add("position table=1 partition=5 bucket=0 node=3 term=9 index=100\nposition table=1 partition=5 bucket=0 node=4 term=9 index=99\n")
	f.Add("position table=-1 node==3")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := readPositions(strings.NewReader(in))
		if err != nil {
			return
		}
		for b, nodes := range got {
			if b.TableID < 0 || b.PartitionID < 0 || b.Bucket < 0 {
				t.Fatalf("accepted bucket %+v", b)
			}
			for id := range nodes {
				if id <= 0 {
					t.Fatalf("accepted node %d", id)
				}
			}
		}
	})
}

// TestLeaderless: a bucket counts as without a leader unless a node that
// answered reports leading it; another node's view of its leader does not
// count.
func TestLeaderless(t *testing.T) {
	b := func(i int32) raftmeta.BucketID { return raftmeta.BucketID{TableID: 1, Bucket: i} }
	as := []raftmeta.Assignment{{BucketID: b(0)}, {BucketID: b(1)}, {BucketID: b(2)}, {BucketID: b(3)}}
	stats := map[raftmeta.NodeID]*nodeStats{
		1: {Buckets: []bucketLeader{{Bucket: b(0), Leader: 1}, {Bucket: b(1), Leader: 3}, {Bucket: b(2), Leader: 0}}},
		2: {Buckets: []bucketLeader{{Bucket: b(0), Leader: 1}, {Bucket: b(3), Leader: 2}}},
	}
	// Bucket 1: node 1 names node 3, which did not answer; bucket 2: no
	// leader known.
	if got := leaderless(as, stats); got != 2 {
		t.Fatalf("leaderless = %d, want 2", got)
	}
}

// TestLostBuckets: a bucket is lost when every replica is on a node the
// catalog marks left; a replica on a node that is active, draining, or
// not in the catalog keeps it from counting.
func TestLostBuckets(t *testing.T) {
	b := func(i int32, reps ...raftmeta.NodeID) raftmeta.Assignment {
		return raftmeta.Assignment{BucketID: raftmeta.BucketID{TableID: 1, Bucket: i}, Replicas: reps}
	}
	nodes := []raftmeta.Node{{ID: 1, State: raftmeta.NodeLeft}, {ID: 2, State: raftmeta.NodeLeft},
		{ID: 3, State: raftmeta.NodeActive}, {ID: 4, State: raftmeta.NodeDraining}}
	as := []raftmeta.Assignment{b(0, 1), b(1, 1, 2), b(2, 1, 3), b(3, 2, 4), b(4, 2, 9), b(5)}
	if got := lostBuckets(as, nodes); got != 2 {
		t.Fatalf("lostBuckets = %d, want 2 (buckets 0 and 1)", got)
	}
}
