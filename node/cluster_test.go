package node

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/node/nodetest"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// testLogger discards logs unless FLUSS_TEST_LOG is set (to "debug":
// debug records too).
func testLogger() *slog.Logger {
	if v := os.Getenv("FLUSS_TEST_LOG"); v != "" {
		level := slog.LevelInfo
		if v == "debug" {
			level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// waitLayout waits up to 10 s until every bucket of table, as c's node
// lays it out, is ok (what describes ok), and fails the test otherwise.
// Leaders come and go for a moment after elections and handbacks, so one
// look at a layout is not enough.
func waitLayout(t *testing.T, ctx context.Context, c *client.Client, table, what string, ok func(*flussv1.BucketLayout) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		layout, err := c.GetTableLayout(ctx, table)
		i := slices.IndexFunc(layout, func(b *flussv1.BucketLayout) bool { return !ok(b) })
		if err == nil && i < 0 {
			return
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("layout of %s: %v", table, err)
			}
			b := layout[i]
			t.Fatalf("bucket %d of %s has leader %d (replicas %v), want %s", b.Bucket, table, b.Leader, b.Replicas, what)
		}
	}
}

// clusterConfig is a test node with fast bucket elections: about a second
// for a failover, while a leader under the race detector on two busy cores
// keeps its lease (300 ms did not always, in CI).
func clusterConfig(dir string) Config {
	cfg := testConfig(dir)
	cfg.Raft.HeartbeatTimeout = Duration{500 * time.Millisecond}
	cfg.Raft.ElectionTimeout = Duration{500 * time.Millisecond}
	cfg.Raft.CommitTimeout = Duration{50 * time.Millisecond}
	return cfg
}

func startCluster(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := newStarted(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startThreeNodes starts a cluster of three nodes (each config passed
// through tune, when set): the first bootstraps, the other two join it at
// once. The configs name the bound addresses, for restarts; the nodes in
// the slice when the test ends are closed.
func startThreeNodes(t *testing.T, tune func(*Config)) ([]*Node, []Config) {
	t.Helper()
	cfgs := make([]Config, 3)
	for i := range cfgs {
		cfgs[i] = clusterConfig(t.TempDir())
		if tune != nil {
			tune(&cfgs[i])
		}
	}
	nodes := make([]*Node, 3)
	t.Cleanup(func() { // after the TempDir cleanups, so it runs before them
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	nodes[0] = startCluster(t, cfgs[0])
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := 1; i < 3; i++ {
		cfgs[i].Join = []string{nodes[0].peers.Addr()}
		wg.Go(func() { nodes[i], errs[i] = newStarted(cfgs[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		cfgs[i].PeerAddr, cfgs[i].ClientAddr = n.peers.Addr(), n.ClientAddr()
	}
	return nodes, cfgs
}

// newStarted is New + Start (bounded), safe to call off the test goroutine.
func newStarted(cfg Config) (*Node, error) { return newStartedLog(cfg, testLogger()) }

func newStartedLog(cfg Config, logger *slog.Logger) (*Node, error) {
	n, err := New(cfg, logger)
	if err != nil {
		return nil, err
	}
	n.gossipProfile = membership.ProfileLocal
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// metaVoters counts the voters of the metadata group as n sees it.
func metaVoters(n *Node) int {
	servers, err := n.meta.Servers()
	if err != nil {
		return -1
	}
	v := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			v++
		}
	}
	return v
}

// replicaBytes is the concatenation of every batch a node's replica of b
// has applied, and its high watermark.
func replicaBytes(t *testing.T, n *Node, b raftmeta.BucketID) ([]byte, int64) {
	t.Helper()
	r := n.replica(b)
	if r == nil {
		return nil, -1
	}
	var out []byte
	var hw int64
	for off := int64(0); ; {
		batches, h, _, err := r.FetchLocal(context.Background(), off, 1<<20, 0)
		if err != nil {
			t.Fatalf("node %d bucket %v FetchLocal(%d): %v", n.ID(), b, off, err)
		}
		hw = h
		if len(batches) == 0 {
			return out, hw
		}
		for _, bb := range batches {
			out = append(out, bb...)
		}
		base, count, err := batchSpan(batches[len(batches)-1])
		if err != nil {
			t.Fatal(err)
		}
		off = base + int64(count)
		if off >= hw {
			return out, hw
		}
	}
}

// checkReplicasIdentical waits until every replica of every bucket of the
// table holds the same bytes and high watermark. nodes[i] is node i+1, nil
// for one that is down or gone; the first one's catalog is used.
func checkReplicasIdentical(t *testing.T, nodes []*Node, tableID int64) {
	t.Helper()
	ref := nodes[slices.IndexFunc(nodes, func(n *Node) bool { return n != nil })]
	var why string
	deadline := time.Now().Add(20 * time.Second)
	for {
		why = ""
		for _, a := range ref.meta.AssignmentsForTable(tableID) {
			var first []byte
			var firstHW int64 = -2
			for _, id := range a.Replicas {
				n := nodes[id-1]
				got, hw := replicaBytes(t, n, a.BucketID)
				if hw < 0 {
					why = fmt.Sprintf("node %d has no replica of bucket %d yet", id, a.Bucket)
					break
				}
				if firstHW == -2 {
					first, firstHW = got, hw
					continue
				}
				if hw != firstHW || !bytes.Equal(got, first) {
					why = fmt.Sprintf("bucket %d: node %d holds %d bytes up to %d, node %d holds %d bytes up to %d",
						a.Bucket, a.Replicas[0], len(first), firstHW, id, len(got), hw)
				}
			}
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterJoinReplicateFailover forms a 3-node cluster by joining,
// creates a replicated table through a non-leader, writes and reads
// through every node, checks the replicas are byte-identical, then stops
// the metadata leader (which leads buckets too) and checks that writes and
// catalog changes continue and that the restarted node catches up.
func TestClusterJoinReplicateFailover(t *testing.T) {
	longCluster(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	cfgs := make([]Config, 3)
	nodes := make([]*Node, 3)
	cfgs[0] = clusterConfig(dirs[0])
	nodes[0] = startCluster(t, cfgs[0])
	seed := nodes[0].peers.Addr()
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	}()
	// Two nodes join at once: the leader gives them distinct ids.
	var wg sync.WaitGroup
	startErrs := make([]error, 3)
	for i := 1; i < 3; i++ {
		cfgs[i] = clusterConfig(dirs[i])
		cfgs[i].Join = []string{seed}
		wg.Go(func() { nodes[i], startErrs[i] = newStarted(cfgs[i]) })
	}
	wg.Wait()
	if err := errors.Join(startErrs...); err != nil {
		t.Fatalf("a joining node did not start: %v", err)
	}
	if nodes[1].ID() > nodes[2].ID() { // index i holds node id i+1
		nodes[1], nodes[2] = nodes[2], nodes[1]
		cfgs[1], cfgs[2] = cfgs[2], cfgs[1]
	}
	for i, n := range nodes {
		if n.ID() != raftmeta.NodeID(i+1) {
			t.Fatalf("node %d got id %d, want allocated ids 1, 2, 3", i, n.ID())
		}
		// Later starts reuse the bound addresses, as a restarted server does.
		cfgs[i].PeerAddr, cfgs[i].ClientAddr = n.peers.Addr(), n.ClientAddr()
	}
	waitFor(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			if metaVoters(n) != 3 || len(n.meta.Nodes()) != 3 {
				return false
			}
		}
		return true
	})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var clients []*client.Client
	for _, n := range nodes {
		clients = append(clients, client.New("http://"+n.ClientAddr(), client.WithRetry(client.Retry{Attempts: 50, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond})))
	}
	metaLeader, _ := nodes[0].meta.Leader()
	other := clients[metaLeader%3] // a node that is not the metadata leader
	if err := other.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatalf("CreateDatabase through a follower: %v", err)
	}
	tableID, err := other.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "s", Type: "STRING"}}},
		BucketCount: 6,
		Properties:  map[string]string{"table.replication.factor": "3"},
	})
	if err != nil {
		t.Fatalf("CreateTable through a follower: %v", err)
	}
	for i, c := range clients {
		dbs, err := c.ListDatabases(ctx)
		if err != nil || !slices.Contains(dbs, "db") {
			t.Fatalf("node %d ListDatabases: %v %v", i+1, dbs, err)
		}
	}

	// Placement: 3 replicas on 3 distinct nodes; leaders known everywhere.
	// CreateTable waited for leaders on the node that served it; another
	// node learns them from the first entries, and a leader may be handing
	// its bucket to the preferred replica (no leader for a moment).
	layout, err := clients[2].GetTableLayout(ctx, "db.t")
	if err != nil || len(layout) != 6 {
		t.Fatalf("layout: %v %v", layout, err)
	}
	for _, b := range layout {
		reps := slices.Clone(b.Replicas)
		slices.Sort(reps)
		if len(slices.Compact(reps)) != 3 {
			t.Fatalf("bucket %d replicas %v: want 3 distinct nodes", b.Bucket, b.Replicas)
		}
	}
	waitLayout(t, ctx, clients[2], "db.t", "a leader among its replicas", func(b *flussv1.BucketLayout) bool {
		return slices.Contains(b.Replicas, b.Leader)
	})

	// Appends through every node, to every bucket.
	appendRows := func(c *client.Client, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			b := int32(i % 6)
			if _, err := c.AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.t", Bucket: &b,
				Rows: []byte(fmt.Sprintf(`[{"id":%d,"s":"row %d"}]`, i, i))}); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
		}
	}
	for i, c := range clients {
		appendRows(c, i*12, i*12+12)
	}
	want := readAll(t, ctx, clients[0], "db.t", 6)
	for i := 0; i < 36; i++ {
		if !strings.Contains(want, fmt.Sprintf(`"row %d"`, i)) {
			t.Fatalf("row %d missing from %s", i, want)
		}
	}
	for i, c := range clients[1:] {
		if got := readAll(t, ctx, c, "db.t", 6); got != want {
			t.Fatalf("node %d reads\n%s\nwant\n%s", i+2, got, want)
		}
	}
	offs, err := clients[1].ListOffsets(ctx, "db.t", flussv1.ListOffsetsRequest_LATEST, 0)
	if err != nil || len(offs) != 6 {
		t.Fatalf("ListOffsets: %v %v", offs, err)
	}
	for _, o := range offs {
		if o.Offset != 6 {
			t.Fatalf("bucket %d latest offset %d, want 6", o.Bucket, o.Offset)
		}
	}
	checkReplicasIdentical(t, nodes, tableID)

	// One batch as large as limits.max_batch_bytes allows (above the 8 MiB
	// a raft entry once held) is stored and replicated to every replica.
	bigID, err := other.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "db.big", BucketCount: 1,
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "s", Type: "STRING"}}}})
	if err != nil {
		t.Fatal(err)
	}
	bigRows, bigBytes := bigJSONRows(11600, 750)
	if res, err := clients[1].AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.big", Rows: bigRows}); err != nil {
		t.Fatalf("append of a %d-byte request under max_batch_bytes: %v", len(bigRows), err)
	} else if n := res[0].Count; len(res) != 1 || n != 11600 {
		t.Fatalf("append stored %d records, want 11600", n)
	}
	if bigBytes < 8<<20 {
		t.Fatalf("test rows carry %d random bytes: not enough to need an entry over 8 MiB", bigBytes)
	}
	checkReplicasIdentical(t, nodes, bigID)
	if err := clients[0].DropTable(ctx, "db.big", false); err != nil { // the leader counts below
		t.Fatal(err)
	}

	// Schema evolution through a node that does not lead the metadata
	// group: every node reads the rows written before with the added column
	// null. (A node's catalog follows the metadata group by milliseconds;
	// the writes with the new column wait until every node has it.)
	if _, err := other.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "db.evolve", BucketCount: 1,
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}}}); err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		if _, err := c.Append(ctx, "db.evolve", []byte(fmt.Sprintf(`[{"id":%d}]`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if sid, err := other.AddColumns(ctx, "db.evolve", &flussv1.Column{Name: "note", Type: "STRING"}); err != nil || sid != 2 {
		t.Fatalf("AddColumns through a follower of the metadata group = %d, %v", sid, err)
	}
	waitFor(t, 10*time.Second, func() bool {
		for _, n := range nodes {
			if tb, err := n.meta.FSM().TableByName("db", "evolve"); err != nil || tb.Schema().ID != 2 {
				return false
			}
		}
		return true
	})
	for i, c := range clients {
		if _, err := c.Append(ctx, "db.evolve", []byte(fmt.Sprintf(`[{"id":%d,"note":"n%d"}]`, 10+i, i))); err != nil {
			t.Fatal(err)
		}
	}
	wantEvolved := `[{"id":0,"note":null},{"id":1,"note":null},{"id":2,"note":null},{"id":10,"note":"n0"},{"id":11,"note":"n1"},{"id":12,"note":"n2"}]`
	for i, c := range clients {
		if got := readAll(t, ctx, c, "db.evolve", 1); got != wantEvolved {
			t.Fatalf("node %d reads the evolved table as\n%s\nwant\n%s", i+1, got, wantEvolved)
		}
	}
	if err := clients[0].DropTable(ctx, "db.evolve", false); err != nil { // the leader counts below
		t.Fatal(err)
	}

	// A table with one replica per bucket: most buckets live elsewhere, so
	// requests are forwarded from nodes that hold no replica at all.
	singleID, err := clients[0].CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.single",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: 3,
		Properties:  map[string]string{"table.replication.factor": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range clients {
		for b := int32(0); b < 3; b++ {
			if _, err := c.AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.single", Bucket: &b,
				Rows: []byte(fmt.Sprintf(`[{"id":%d}]`, i))}); err != nil {
				t.Fatalf("append through node %d to bucket %d: %v", i+1, b, err)
			}
		}
	}
	single := readAll(t, ctx, clients[2], "db.single", 3)
	if want := strings.Repeat(`[{"id":0},{"id":1},{"id":2}]`+"\n", 3); single+"\n" != want {
		t.Fatalf("single-replica table reads %s, want %s", single, want)
	}

	// The hop limit: a forwarded catalog write that reaches a node that is
	// not the metadata leader is answered, not forwarded again. (Under load
	// the metadata leadership may have moved since the start: ask again.)
	metaLeader = agreedMetaLeader(t, nodes)
	follower := nodes[metaLeader%3]
	resp, err := nodes[metaLeader-1].callMetaOp(ctx, follower.peers.Addr(), &metaOp{Op: opCreateDatabase, Name: "loop"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeError(resp.Code, resp.Msg); !errors.Is(err, raftmeta.ErrNotLeader) {
		t.Fatalf("forwarded op on a follower: %v, want ErrNotLeader", err)
	}

	// A forwarded data-path request is answered by its receiver, never
	// forwarded again: no replica here, or "the leader is X", both marked
	// as refused before anything was proposed.
	for _, a := range nodes[0].meta.AssignmentsForTable(singleID) {
		holder := nodes[a.Replicas[0]-1]
		other := nodes[a.Replicas[0]%3]
		q := appendBucketReq(nil, &bucketReq{Bucket: a.BucketID, TimeoutMs: 1000, Batches: [][]byte{[]byte("not a batch")}})
		b, err := other.handleBucket(callBucketWrite)(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		p, err := decodeBucketResp(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeError(p.Code, p.Msg); !errors.Is(err, rpc.ErrNoBucketLeader) || !p.Unsent {
			t.Fatalf("forwarded append to node %d without a replica: %v unsent=%v", other.ID(), err, p.Unsent)
		}
		// On the holder, the same garbage is refused as invalid input.
		b, _ = holder.handleBucket(callBucketWrite)(ctx, q)
		if p, err = decodeBucketResp(b); err != nil || !errors.Is(decodeError(p.Code, p.Msg), raftmeta.ErrInvalid) {
			t.Fatalf("garbage batch on the leader: %+v %v", p, err)
		}
	}
	// Leaders move to their preferred replicas: placement rotates those,
	// so every node ends up leading 2 of the 6 buckets. Under -race on two
	// cores a transfer can fail and wait out the backoff (30 heartbeat
	// timeouts, 9 s here) before the next try.
	var info *flussv1.DescribeClusterResponse
	waitFor(t, 60*time.Second, func() bool {
		info, err = clients[0].DescribeCluster(ctx)
		if err != nil || len(info.Nodes) != 3 {
			return false
		}
		for _, ni := range info.Nodes {
			if ni.Leaders != 3 { // 2 of db.t, 1 of db.single
				return false
			}
		}
		// Counts can be even before every leader is its bucket's
		// preferred one; a transfer still to come would race the checks
		// below.
		lay, err := clients[0].GetTableLayout(ctx, "db.t")
		if err != nil {
			return false
		}
		for _, b := range lay {
			if b.Leader != b.Replicas[0] {
				return false
			}
		}
		return true
	})
	// Node 1 now follows 4 buckets of db.t: a forwarded request there is
	// answered with the leader, not forwarded.
	followed := 0
	for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
		r := nodes[0].replica(a.BucketID)
		if r == nil || r.IsLeader() {
			continue
		}
		followed++
		// Right after a leadership transfer a follower may not know the
		// new leader yet (it learns it from the first heartbeat): the
		// answer must name one within a few heartbeats.
		var last string
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := nodes[0].handleBucket(callBucketOff)(ctx, appendBucketReq(nil, &bucketReq{Bucket: a.BucketID, Spec: int32(rpc.OffsetLatest)}))
			p, err := decodeBucketResp(b)
			if err != nil {
				t.Fatal(err)
			}
			rerr := decodeError(p.Code, p.Msg)
			if errors.Is(rerr, rpc.ErrNotLeader) && p.Leader != 0 && p.Leader != 1 && p.Unsent {
				break
			}
			last = fmt.Sprintf("%v leader=%d unsent=%v", rerr, p.Leader, p.Unsent)
			if time.Now().After(deadline) {
				t.Fatalf("forwarded request on a follower: %s", last)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if followed == 0 {
		t.Fatal("node 1 follows no bucket of db.t")
	}
	var leaders, replicas int32
	for _, ni := range info.Nodes {
		leaders += ni.Leaders
		replicas += ni.Replicas
		if ni.MetaRole != "leader" && ni.MetaRole != "voter" {
			t.Fatalf("node %d meta role %q", ni.Id, ni.MetaRole)
		}
	}
	if replicas != 21 || leaders != 9 {
		t.Fatalf("DescribeCluster counts %d replicas and %d leaders, want 21 and 9", replicas, leaders)
	}

	// Stop the metadata leader; it leads buckets too (or at least holds
	// replicas of all of them).
	victim := int(agreedMetaLeader(t, nodes)) - 1
	if err := nodes[victim].Close(); err != nil {
		t.Fatal(err)
	}
	nodes[victim] = nil
	alive := (victim + 1) % 3
	appendRows(clients[alive], 36, 48)
	waitLayout(t, ctx, clients[alive], "db.t", fmt.Sprintf("a leader other than the stopped node %d", victim+1), func(b *flussv1.BucketLayout) bool {
		return b.Leader != 0 && b.Leader != int32(victim+1)
	})
	if err := clients[alive].CreateDatabase(ctx, "db2", false); err != nil {
		t.Fatalf("catalog write after losing the metadata leader: %v", err)
	}
	got := readAll(t, ctx, clients[(victim+2)%3], "db.t", 6)
	for i := 0; i < 48; i++ {
		if !strings.Contains(got, fmt.Sprintf(`"row %d"`, i)) {
			t.Fatalf("after failover row %d missing from %s", i, got)
		}
	}

	// The stopped node restarts with its data and identity and catches up.
	nodes[victim] = startCluster(t, cfgs[victim])
	if nodes[victim].ID() != raftmeta.NodeID(victim+1) {
		t.Fatalf("restarted node has id %d", nodes[victim].ID())
	}
	checkReplicasIdentical(t, nodes, tableID)
	waitFor(t, 20*time.Second, func() bool {
		dbs, err := nodes[victim].ListDatabases(ctx)
		return err == nil && slices.Contains(dbs, "db2")
	})
	c := client.New("http://"+nodes[victim].ClientAddr(), client.WithRetry(client.Retry{Attempts: 50, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
	if got := readAll(t, ctx, c, "db.t", 6); got != readAll(t, ctx, clients[alive], "db.t", 6) {
		t.Fatalf("restarted node reads differently")
	}
}

// TestClusterJoinThroughGossipAddress: fresh nodes (no id yet, so no
// gossip of their own) join through a member's gossip address: node 2
// through node 1's, node 3 through node 2's, which exists only since node
// 2 joined.
func TestClusterJoinThroughGossipAddress(t *testing.T) {
	// The seeds see no protocol errors: a joining node never sends a
	// gossip listener peer bytes (memberlist logs them as errors).
	logs := newErrorLog()
	first, err := newStartedLog(clusterConfig(t.TempDir()), slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*Node{first}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	for i := 1; i < 3; i++ {
		cfg := clusterConfig(t.TempDir())
		cfg.Join = []string{nodes[i-1].gossip.m.GossipAddr()}
		n, err := newStartedLog(cfg, slog.New(logs))
		if err != nil {
			t.Fatalf("node %d joining through gossip address %s: %v", i+1, cfg.Join[0], err)
		}
		nodes = append(nodes, n)
		if n.ID() != raftmeta.NodeID(i+1) {
			t.Fatalf("joined node got id %d, want %d", n.ID(), i+1)
		}
	}
	waitFor(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			if len(n.meta.Nodes()) != 3 || len(n.members()) != 3 {
				return false
			}
		}
		return true
	})
	if bad := logs.matching("decode"); len(bad) > 0 {
		t.Fatalf("the seeds logged protocol errors: %q", bad)
	}
}

// errorLog is a slog handler that keeps the messages of error records
// (shared by the handlers derived from it) and passes every record on to
// next.
type errorLog struct {
	next slog.Handler
	rec  *errorRecords
}

type errorRecords struct {
	mu   sync.Mutex
	msgs []string
}

func newErrorLog() *errorLog { return &errorLog{next: testLogger().Handler(), rec: &errorRecords{}} }

func (l *errorLog) Enabled(ctx context.Context, lv slog.Level) bool {
	return lv >= slog.LevelError || l.next.Enabled(ctx, lv)
}
func (l *errorLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &errorLog{next: l.next.WithAttrs(as), rec: l.rec}
}
func (l *errorLog) WithGroup(g string) slog.Handler {
	return &errorLog{next: l.next.WithGroup(g), rec: l.rec}
}
func (l *errorLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		l.rec.mu.Lock()
		l.rec.msgs = append(l.rec.msgs, r.Message)
		l.rec.mu.Unlock()
	}
	if l.next.Enabled(ctx, r.Level) {
		return l.next.Handle(ctx, r)
	}
	return nil
}

// matching returns the error messages that contain sub.
func (l *errorLog) matching(sub string) []string {
	l.rec.mu.Lock()
	defer l.rec.mu.Unlock()
	var out []string
	for _, m := range l.rec.msgs {
		if strings.Contains(m, sub) {
			out = append(out, m)
		}
	}
	return out
}

// TestClusterStaticBootstrap starts 3 nodes at once with bootstrap_expect
// = 3, meta_voters = 2 and each other's peer (or gossip) addresses: exactly
// one cluster forms, with 2 metadata voters, 1 non-voter and one cluster
// id; a restart does not bootstrap again.
func TestClusterStaticBootstrap(t *testing.T) {
	for _, seeds := range []string{"peer", "gossip"} {
		t.Run(seeds, func(t *testing.T) { testStaticBootstrap(t, seeds == "gossip") })
	}
}

func testStaticBootstrap(t *testing.T, gossipSeeds bool) {
	// The addresses must be known before the nodes start (each one's join
	// list names them all), so they are picked free and then bound again;
	// another process may take one in between. Such a start is retried with
	// fresh addresses; every other error fails the test.
	var nodes []*Node
	var cfgs []Config
	for attempt := 1; ; attempt++ {
		var errs []error
		logs := newErrorLog()
		nodes, cfgs, errs = startStatic(t, gossipSeeds, slog.New(logs))
		t.Cleanup(func() {
			// Nodes speak to each join-list entry in its own protocol
			// (memberlist logs peer bytes as errors; before seeds were
			// classified, this test logged 16). While all three start at
			// once, a probe of a gossip listener that is still coming up
			// can fail although it accepts connections (seen once under
			// -race), and that node then asks it as a peer once: at most
			// one such error per node.
			if bad := logs.matching("decode"); len(bad) > len(nodes) {
				t.Errorf("protocol errors logged: %q", bad)
			}
		})
		if errors.Join(errs...) == nil {
			break
		}
		inUse := false
		for i, err := range errs {
			if err != nil {
				t.Logf("attempt %d: node %d: %v", attempt, i, err)
				inUse = inUse || strings.Contains(err.Error(), "address already in use")
			}
		}
		if !inUse || attempt == 3 {
			t.FailNow()
		}
		for _, n := range nodes {
			n.Close()
		}
	}
	waitFor(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			servers, err := n.meta.Servers()
			if err != nil || len(servers) != 3 || metaVoters(n) != 2 || len(n.meta.Nodes()) != 3 || n.meta.ClusterID() == "" {
				return false
			}
		}
		return true
	})
	// Voters are capped at meta_voters; the third node replicates only.
	info, err := nodes[0].DescribeCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	roles := map[raftmeta.NodeID]string{}
	for _, ni := range info.Nodes {
		roles[ni.ID] = ni.MetaRole
	}
	count := map[string]int{}
	for _, r := range roles {
		count[r]++
	}
	if len(roles) != 3 || count["leader"] != 1 || count["voter"] != 1 || count["nonvoter"] != 1 {
		t.Fatalf("metadata roles %v: want one leader, one voter, one non-voter", roles)
	}
	id := nodes[0].meta.ClusterID()
	for _, n := range nodes[1:] {
		if n.meta.ClusterID() != id {
			t.Fatalf("two clusters formed: %q and %q", id, n.meta.ClusterID())
		}
	}
	// A restarted member with state does not bootstrap again.
	if err := nodes[2].Close(); err != nil { // node id 1, the bootstrapper
		t.Fatal(err)
	}
	cfgs[2].ClientAddr = nodetest.FreeAddr()
	nodes[2] = startCluster(t, cfgs[2])
	waitFor(t, 20*time.Second, func() bool {
		return nodes[2].meta.ClusterID() == id && metaVoters(nodes[2]) == 2
	})
}

// startStatic starts 3 fresh nodes at once with bootstrap_expect = 3,
// meta_voters = 2 and each other's peer (or gossip) addresses as join list.
// It returns the nodes (closed when the test ends), their configurations and
// each one's Start error.
func startStatic(t *testing.T, gossipSeeds bool, logger *slog.Logger) ([]*Node, []Config, []error) {
	peers := []string{nodetest.FreeAddr(), nodetest.FreeAddr(), nodetest.FreeAddr()}
	gossips := []string{nodetest.FreeAddr(), nodetest.FreeAddr(), nodetest.FreeAddr()}
	nodes := make([]*Node, 3)
	cfgs := make([]Config, 3)
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		cfgs[i] = clusterConfig(t.TempDir())
		cfgs[i].NodeID = int32(3 - i) // the smallest id is not the first started
		cfgs[i].PeerAddr = peers[i]
		cfgs[i].GossipAddr = gossips[i]
		cfgs[i].BootstrapExpect = 3
		cfgs[i].MetaVoters = 2
		cfgs[i].Join = peers
		if gossipSeeds {
			cfgs[i].Join = gossips
		}
		n, err := New(cfgs[i], logger)
		if err != nil {
			t.Fatal(err)
		}
		n.gossipProfile = membership.ProfileLocal
		nodes[i] = n
	}
	for i, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			errs[i] = n.Start(ctx)
		})
	}
	wg.Wait()
	return nodes, cfgs, errs
}

func TestLoadNodeIDFallback(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		configured, fallback int32
		want                 raftmeta.NodeID
		err                  string
	}{
		{"bootstrap default", 0, 1, 1, ""},
		{"join allocates", 0, 0, 0, ""},
		{"configured wins", 7, 0, 7, ""},
		{"static bootstrap needs an id", 0, -1, 0, "needs node_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadNodeID(t.TempDir(), tc.configured, tc.fallback)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want error %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d %v, want %d", got, err, tc.want)
			}
		})
	}
}

// batchSpan is the base offset and record count of a stored batch.
func batchSpan(b []byte) (int64, int32, error) {
	bt, _, err := record.ParseBatch(b)
	if err != nil {
		return 0, 0, err
	}
	return bt.BaseOffset, bt.RecordCount, nil
}

// TestClusterNodeMovesPeerAddress restarts a member on a new peer address
// (a new pod IP): it re-admits itself, the metadata group and its bucket
// groups learn the new address, and its replicas catch up.
func TestClusterNodeMovesPeerAddress(t *testing.T) {
	if raceEnabled {
		// hashicorp/raft v1.7.3 logs from pipelineSend with a peer address
		// that startStopReplication rewrites without a lock when a server's
		// address changes (upstream hashicorp/raft#681, fix #682 open): a
		// race in the library, reported by -race. The test runs without it.
		t.Skip("hashicorp/raft v1.7.3 races on a peer address change (hashicorp/raft#681); runs without -race")
	}
	cfgs := make([]Config, 3)
	nodes := make([]*Node, 3)
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	}()
	for i := range 3 {
		cfgs[i] = clusterConfig(t.TempDir())
		if i > 0 {
			cfgs[i].Join = []string{nodes[0].peers.Addr()}
		}
		nodes[i] = startCluster(t, cfgs[i])
	}
	waitFor(t, 20*time.Second, func() bool { return metaVoters(nodes[0]) == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	retry := client.WithRetry(client.Retry{Attempts: 50, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond})
	c := client.New("http://"+nodes[0].ClientAddr(), retry)
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "db.t",
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}}, BucketCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "db.t", []byte(`[{"id":1},{"id":2},{"id":3}]`)); err != nil {
		t.Fatal(err)
	}

	// Node 3 moves to new ports.
	old := nodes[2].peers.Addr()
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	nodes[2] = nil
	if _, err := c.Append(ctx, "db.t", []byte(`[{"id":4},{"id":5}]`)); err != nil {
		t.Fatal(err)
	}
	nodes[2] = startCluster(t, cfgs[2]) // peer_addr 127.0.0.1:0: a new port
	moved := nodes[2].peers.Addr()
	if moved == old {
		t.Skip("the kernel gave the same port again")
	}
	waitFor(t, 20*time.Second, func() bool {
		servers, err := nodes[0].meta.Servers()
		if err != nil {
			return false
		}
		for _, s := range servers {
			if s.ID == "3" {
				return s.Address == raft.ServerAddress(moved)
			}
		}
		return false
	})
	checkReplicasIdentical(t, nodes, tableID)
	c3 := client.New("http://"+nodes[2].ClientAddr(), retry)
	if _, err := c3.Append(ctx, "db.t", []byte(`[{"id":6}]`)); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, ctx, c3, "db.t", 2); strings.Count(got, `"id"`) != 6 {
		t.Fatalf("after the move node 3 reads %s", got)
	}
	checkReplicasIdentical(t, nodes, tableID)
}

// TestClusterGrowsAfterSingleNodeMoved restarts a single node on a new
// peer port (it elects itself without the network) and then grows it: the
// leader corrected its own address, so the joining node reaches it.
func TestClusterGrowsAfterSingleNodeMoved(t *testing.T) {
	cfg := clusterConfig(t.TempDir())
	n1 := startCluster(t, cfg)
	old := n1.peers.Addr()
	if err := n1.Close(); err != nil {
		t.Fatal(err)
	}
	n1 = startCluster(t, cfg)
	defer n1.Close()
	if n1.peers.Addr() == old {
		t.Skip("the kernel gave the same port again")
	}
	waitFor(t, 10*time.Second, func() bool {
		servers, err := n1.meta.Servers()
		return err == nil && len(servers) == 1 && servers[0].Address == raft.ServerAddress(n1.peers.Addr())
	})
	cfg2 := clusterConfig(t.TempDir())
	cfg2.Join = []string{n1.peers.Addr()}
	n2 := startCluster(t, cfg2)
	defer n2.Close()
	waitFor(t, 20*time.Second, func() bool { return metaVoters(n1) == 2 && len(n2.meta.Nodes()) == 2 })
	if err := n2.CreateDatabase(context.Background(), "grown", "", false); err != nil {
		t.Fatalf("catalog write through the new node: %v", err)
	}
}

// agreedMetaLeader waits until every node names the same metadata leader
// and returns it.
func agreedMetaLeader(t *testing.T, nodes []*Node) raftmeta.NodeID {
	t.Helper()
	var leader raftmeta.NodeID
	waitFor(t, 20*time.Second, func() bool {
		leader = 0
		for _, n := range nodes {
			id, _ := n.meta.Leader()
			if id == 0 || leader != 0 && id != leader {
				return false
			}
			leader = id
		}
		return true
	})
	return leader
}

// bigJSONRows returns n JSON rows {"id":i,"s":base64 of size random bytes}
// (random, so compression cannot shrink them much) and how many random
// bytes they carry.
func bigJSONRows(n, size int) ([]byte, int) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	raw := make([]byte, size)
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"s":"%s"}`, i, base64.StdEncoding.EncodeToString(raw))
	}
	b.WriteByte(']')
	return b.Bytes(), n * size
}

// longCluster marks a test that takes seconds mostly waiting on its nodes'
// timers (elections, grace periods, tiering and lake passes) rather than
// on the CPU: it runs beside the package's other such tests. Each has its
// own directories and ports (nodetest.FreeAddr never hands one out twice).
// Tests whose checks need one leader throughout under load stay serial.
func longCluster(t *testing.T) {
	t.Helper()
	t.Parallel()
}
