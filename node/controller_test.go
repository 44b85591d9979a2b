package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/node/nodetest"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// opsCluster starts n nodes one after the other (ids 1..n), with a short
// dead-node grace period, and waits until every node is registered.
func opsCluster(t *testing.T, n int) ([]*Node, []Config) {
	t.Helper()
	return opsClusterWith(t, n, nil)
}

// opsClusterWith is opsCluster with each node's config passed through
// tune (when not nil) before the node starts.
func opsClusterWith(t *testing.T, n int, tune func(*Config)) ([]*Node, []Config) {
	t.Helper()
	nodes := make([]*Node, n)
	cfgs := make([]Config, n)
	// The directories first: cleanups run last-registered first, so the
	// nodes close before their directories are removed.
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Close()
			}
		}
	})
	for i := range n {
		cfgs[i] = clusterConfig(dirs[i])
		cfgs[i].Cluster.DeadNodeGrace = Duration{2 * time.Second}
		if tune != nil {
			tune(&cfgs[i])
		}
		if i > 0 {
			cfgs[i].Join = []string{nodes[0].peers.Addr()}
		}
		nodes[i] = startCluster(t, cfgs[i])
		if nodes[i].ID() != raftmeta.NodeID(i+1) {
			t.Fatalf("node %d got id %d", i+1, nodes[i].ID())
		}
		cfgs[i].PeerAddr, cfgs[i].ClientAddr = nodes[i].peers.Addr(), nodes[i].ClientAddr()
	}
	waitFor(t, 20*time.Second, func() bool {
		for _, nd := range nodes {
			if len(nd.meta.Nodes()) != n || !allAlive(nd, ids(n)...) {
				return false
			}
		}
		return true
	})
	return nodes, cfgs
}

func ids(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i + 1)
	}
	return out
}

func retryClient(n *Node) *client.Client {
	return client.New("http://"+n.ClientAddr(), client.WithRetry(client.Retry{Attempts: 80, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
}

// createT creates database db and its table t (id BIGINT, s STRING: the
// rows appendTo writes) of buckets buckets replicated three ways, and
// returns the table's id.
func createT(t *testing.T, ctx context.Context, c *client.Client, buckets int32) int64 {
	t.Helper()
	return createTWith(t, ctx, c, buckets, 3)
}

// createTWith is createT with rf replicas per bucket.
func createTWith(t *testing.T, ctx context.Context, c *client.Client, buckets int32, rf int) int64 {
	t.Helper()
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "s", Type: "STRING"}}},
		BucketCount: buckets,
		Properties:  map[string]string{"table.replication.factor": strconv.Itoa(rf)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// appendTo appends rows from..to-1 to db.t round-robin over its buckets
// and fails the test on any error: every row is acknowledged.
func appendTo(t *testing.T, ctx context.Context, c *client.Client, buckets int32, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		b := int32(i) % buckets
		if _, err := c.AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.t", Bucket: &b,
			Rows: []byte(fmt.Sprintf(`[{"id":%d,"s":"row %d"}]`, i, i))}); err != nil {
			t.Fatalf("append row %d: %v", i, err)
		}
	}
}

func checkRows(t *testing.T, ctx context.Context, c *client.Client, buckets int32, n int) {
	t.Helper()
	got := readAll(t, ctx, c, "db.t", buckets)
	for i := range n {
		if !strings.Contains(got, fmt.Sprintf(`"row %d"`, i)) {
			t.Fatalf("acknowledged row %d is missing", i)
		}
	}
}

// nodeInfo is node id's entry in DescribeCluster as c's node answers it.
func nodeInfo(ctx context.Context, c *client.Client, id int32) *flussv1.NodeInfo {
	info, err := c.DescribeCluster(ctx)
	if err != nil {
		return nil
	}
	for _, ni := range info.Nodes {
		if ni.Id == id {
			return ni
		}
	}
	return nil
}

// waitNodes waits up to timeout until ok holds for the nodes of
// DescribeCluster as c's node answers it (keyed by id), and otherwise fails
// the test with what the nodes last showed: which node leads how many
// buckets, and the catalog's replicas of every bucket.
func waitNodes(t *testing.T, ctx context.Context, c *client.Client, meta *raftmeta.Meta, timeout time.Duration, what string, ok func(map[int32]*flussv1.NodeInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info, err := c.DescribeCluster(ctx)
		if err == nil {
			byID := make(map[int32]*flussv1.NodeInfo, len(info.Nodes))
			for _, ni := range info.Nodes {
				byID[ni.Id] = ni
			}
			if ok(byID) {
				return
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				for _, ni := range info.Nodes {
					t.Logf("node %d: %s, leads %d buckets", ni.Id, ni.State, ni.Leaders)
				}
			}
			for _, a := range meta.Assignments() {
				t.Logf("bucket %v: replicas %v", a.BucketID, a.Replicas)
			}
			t.Fatalf("not within %v: %s (last DescribeCluster error: %v)", timeout, what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leadersEven reports whether the nodes lead total buckets between them,
// at most one apart: the controller's spread of the preferred leaders.
func leadersEven(nodes map[int32]*flussv1.NodeInfo, total int32) bool {
	lo, hi, sum := int32(math.MaxInt32), int32(0), int32(0)
	for _, ni := range nodes {
		lo, hi, sum = min(lo, ni.Leaders), max(hi, ni.Leaders), sum+ni.Leaders
	}
	return sum == total && hi-lo <= 1
}

// TestClusterDrain drains a node through the Admin API: it ends up leading
// no bucket and shows draining, writes go on, it gets no replica of a new
// table, its state survives a restart, and undrain makes it lead again.
func TestClusterDrain(t *testing.T) {
	longCluster(t)
	nodes, cfgs := opsCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := retryClient(nodes[0])
	const buckets = 6
	createT(t, ctx, c, buckets)
	appendTo(t, ctx, c, buckets, 0, 12)
	// Leaders settle on their preferred replicas: node 2 leads some.
	waitNodes(t, ctx, c, nodes[0].meta, 30*time.Second, "node 2 leads 2 buckets", func(ns map[int32]*flussv1.NodeInfo) bool {
		return ns[2] != nil && ns[2].Leaders == 2
	})

	// Errors: unknown node, bad id.
	_, err := c.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{NodeId: 42}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("drain of an unknown node: %v, want not_found", err)
	}
	_, err = c.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("drain without a node id: %v, want invalid_argument", err)
	}

	// Drain node 2 through node 3 (not the metadata leader: forwarded).
	c3 := retryClient(nodes[2])
	if _, err := c3.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{NodeId: 2})); err != nil {
		t.Fatalf("drain node 2: %v", err)
	}
	if _, err := c3.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{NodeId: 2})); err != nil {
		t.Fatalf("drain node 2 again (no-op): %v", err)
	}
	waitNodes(t, ctx, c, nodes[0].meta, 30*time.Second, "node 2 draining and leading nothing", func(ns map[int32]*flussv1.NodeInfo) bool {
		return ns[2] != nil && ns[2].State == "draining" && ns[2].Leaders == 0
	})
	// Writes through the drained node keep working; no leader comes back.
	appendTo(t, ctx, retryClient(nodes[1]), buckets, 12, 24)
	if ni := nodeInfo(ctx, c, 2); ni == nil || ni.Leaders != 0 {
		t.Fatalf("drained node leads again: %+v", ni)
	}
	// New tables are placed on the active nodes only.
	newID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.after",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: 4,
		Properties:  map[string]string{"table.replication.factor": "3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range nodes[0].meta.AssignmentsForTable(newID) {
		if slices.Contains(a.Replicas, 2) || len(a.Replicas) != 2 {
			t.Fatalf("bucket %d of a table created during the drain is on %v", a.Bucket, a.Replicas)
		}
	}

	// A restart keeps the node draining.
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	nodes[1] = startCluster(t, cfgs[1])
	waitNodes(t, ctx, c, nodes[0].meta, 30*time.Second, "node 2 still draining after node 2's restart", func(ns map[int32]*flussv1.NodeInfo) bool {
		return ns[2] != nil && ns[2].State == "draining" && ns[2].Leaders == 0 && allAlive(nodes[0], 1, 2, 3)
	})
	checkRows(t, ctx, c, buckets, 24)

	// Undrain: active again, db.after grows its third replica onto node 2,
	// and the preferred leaders of all ten buckets spread over the three
	// nodes (which buckets move is the controller's choice): node 2 leads
	// again.
	if _, err := c.Admin().UndrainNode(ctx, connect.NewRequest(&flussv1.UndrainNodeRequest{NodeId: 2})); err != nil {
		t.Fatalf("undrain node 2: %v", err)
	}
	waitNodes(t, ctx, c, nodes[0].meta, 60*time.Second, "node 2 active, leaders of the 10 buckets spread evenly", func(ns map[int32]*flussv1.NodeInfo) bool {
		return ns[2] != nil && ns[2].State == "active" && leadersEven(ns, buckets+4)
	})
	for _, a := range nodes[0].meta.AssignmentsForTable(newID) {
		if len(a.Replicas) != 3 {
			t.Fatalf("bucket %d of db.after after the undrain is on %v, want 3 replicas", a.Bucket, a.Replicas)
		}
	}
	appendTo(t, ctx, c3, buckets, 24, 30)
	checkRows(t, ctx, c, buckets, 30)
}

// TestDrainMovesMetaLeader drains the node that leads the metadata group:
// the leadership moves to another node within a few balance passes, the
// catalog shows the drained node draining and not leading it, and DDL
// through the drained node goes on (forwarded to the new leader).
func TestDrainMovesMetaLeader(t *testing.T) {
	nodes, _ := opsCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var x, other *Node
	for _, n := range nodes {
		if n.meta.IsLeader() {
			x = n
		} else {
			other = n
		}
	}
	if x == nil {
		t.Fatal("no node leads the metadata group")
	}
	c := retryClient(other)
	if _, err := c.Admin().DrainNode(ctx, connect.NewRequest(&flussv1.DrainNodeRequest{NodeId: int32(x.ID())})); err != nil {
		t.Fatalf("drain node %d: %v", x.ID(), err)
	}
	for deadline := time.Now().Add(4 * balanceInterval); x.meta.IsLeader(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node %d, draining, still leads the metadata group after %v", x.ID(), 4*balanceInterval)
		}
	}
	// The other nodes learn of the new leader from its first heartbeat.
	waitFor(t, 5*time.Second, func() bool {
		d, err := c.Admin().DescribeCluster(ctx, connect.NewRequest(&flussv1.DescribeClusterRequest{}))
		return err == nil && d.Msg.GetMetaLeader() != 0 && d.Msg.GetMetaLeader() != int32(x.ID())
	})
	if ni := nodeInfo(ctx, c, int32(x.ID())); ni == nil || ni.State != "draining" {
		t.Fatalf("node %d after the drain: %+v", x.ID(), ni)
	}
	if err := retryClient(x).CreateDatabase(ctx, "after_drain", false); err != nil {
		t.Fatalf("DDL through the drained node: %v", err)
	}
}

// TestClusterReplacesDeadNode stops a node for longer than the grace
// period: the metadata leader moves its replicas to a fourth node, each
// bucket group adds the new replica and drops the dead one, writes go on
// throughout, the replicas end byte-identical with every acknowledged row,
// and the stopped node deletes its stale copies when it comes back.
func TestClusterReplacesDeadNode(t *testing.T) {
	longCluster(t)
	nodes, cfgs := opsCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := retryClient(nodes[0])
	const buckets = 6
	tableID := tableBesideNode(t, ctx, nodes, c, 4, buckets, 3) // node 4 holds nothing
	for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
		if slices.Contains(a.Replicas, 4) || a.Epoch != 0 {
			t.Fatalf("bucket %d placed on %v epoch %d", a.Bucket, a.Replicas, a.Epoch)
		}
	}
	appendTo(t, ctx, c, buckets, 0, 30)
	checkReplicasIdentical(t, nodes, tableID)
	live := []*Node{nodes[0], nodes[1], nil, nodes[3]}

	// Stop node 3 (it is not the metadata leader: node 1 bootstrapped).
	stopped := nodes[2]
	stoppedDir := cfgs[2].DataDir
	if err := stopped.Close(); err != nil {
		t.Fatal(err)
	}
	nodes[2] = nil
	// Writes go on while node 3 is down and while its replicas move.
	appendTo(t, ctx, c, buckets, 30, 60)
	waitFor(t, 60*time.Second, func() bool {
		for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
			if slices.Contains(a.Replicas, 3) || !slices.Contains(a.Replicas, 4) || a.Epoch != 1 {
				return false
			}
		}
		return true
	})
	appendTo(t, ctx, retryClient(nodes[3]), buckets, 60, 90)
	// Node 3 is marked left: a table created now is placed elsewhere.
	waitFor(t, 30*time.Second, func() bool { return nodeState(nodes[0], 3) == raftmeta.NodeLeft })
	laterID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.later",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: 4,
		Properties:  map[string]string{"table.replication.factor": "3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range nodes[0].meta.AssignmentsForTable(laterID) {
		if slices.Contains(a.Replicas, 3) {
			t.Fatalf("bucket %d of a table created while node 3 is down is placed on %v", a.Bucket, a.Replicas)
		}
	}
	// The metadata group drops node 3, a voter, and promotes node 4 in its
	// place: three voters again, all of them up.
	waitFor(t, 30*time.Second, func() bool { return metaMembers(nodes[0]) == "1:voter 2:voter 4:voter" })
	// Every group heals: its leader's configuration is the assignment, all
	// voters.
	waitFor(t, 60*time.Second, func() bool { return healed(live, tableID) })
	checkReplicasIdentical(t, live, tableID)
	checkRows(t, ctx, retryClient(nodes[3]), buckets, 90)

	// Node 3 comes back: none of its buckets is assigned to it any more,
	// so it deletes their data and opens none.
	nodes[2] = startCluster(t, cfgs[2])
	waitFor(t, 30*time.Second, func() bool {
		entries, err := os.ReadDir(filepath.Join(stoppedDir, "buckets", fmt.Sprint(tableID), "0"))
		return (err == nil && len(entries) == 0) || os.IsNotExist(err)
	})
	if got := nodes[2].localStats(false).Replicas; got != 0 {
		t.Fatalf("returned node opened %d replicas", got)
	}
	waitFor(t, 30*time.Second, func() bool { return nodeState(nodes[0], 3) == raftmeta.NodeActive })
	// It is back in the metadata group, as a non-voter (the group has its
	// three voters), and its catalog caught up: it knows db.later.
	waitFor(t, 10*time.Second, func() bool { return metaMembers(nodes[0]) == "1:voter 2:voter 3:nonvoter 4:voter" })
	if len(nodes[2].meta.AssignmentsForTable(laterID)) != 4 {
		t.Fatalf("node 3's catalog lacks db.later, created while it was down")
	}
	appendTo(t, ctx, retryClient(nodes[2]), buckets, 90, 96)
	checkRows(t, ctx, c, buckets, 96)
}

// TestBootstrapNodeReturnsAfterRemoval stops node 1, which bootstrapped the
// cluster and so has no join list, for longer than the grace period: the
// metadata group drops it. Restarted on its old data, it finds the others
// through the peers of the metadata group's configuration it restores from
// its log (its catalog copy may not list them yet), is added back, and its
// catalog catches up with what changed while it was down.
func TestBootstrapNodeReturnsAfterRemoval(t *testing.T) {
	longCluster(t)
	nodes, cfgs := opsCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if len(cfgs[0].Join) != 0 {
		t.Fatal("node 1 has a join list")
	}
	if err := nodes[0].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return metaMembers(nodes[1]) == "2:voter 3:voter" })
	if err := retryClient(nodes[1]).CreateDatabase(ctx, "while_down", false); err != nil {
		t.Fatal(err)
	}
	nodes[0] = startCluster(t, cfgs[0])
	waitFor(t, 30*time.Second, func() bool {
		return metaMembers(nodes[1]) == "1:voter 2:voter 3:voter" && nodeState(nodes[1], 1) == raftmeta.NodeActive
	})
	waitFor(t, 10*time.Second, func() bool { _, err := nodes[0].meta.FSM().Database("while_down"); return err == nil })
}

// TestControllerRestoresLiveNode takes a running node out of the metadata
// group and marks it left, as the controller does to a node cut off for
// longer than the grace period that then reconnects without restarting
// (so it never registers again): the controller adds it back to the group,
// promotes it to the voter the group lacks, and marks it active; its
// catalog follows DDL again.
func TestControllerRestoresLiveNode(t *testing.T) {
	nodes, _ := opsCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := nodes[0]
	if !leader.meta.IsLeader() {
		t.Fatal("node 1 does not lead the metadata group")
	}
	waitFor(t, 10*time.Second, func() bool { return metaMembers(leader) == "1:voter 2:voter 3:voter" })
	if err := leader.meta.RemoveServer(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := leader.meta.SetNodeState(ctx, 3, raftmeta.NodeLeft); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool {
		return metaMembers(leader) == "1:voter 2:voter 3:voter" && nodeState(leader, 3) == raftmeta.NodeActive
	})
	if err := retryClient(nodes[1]).CreateDatabase(ctx, "after", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { _, err := nodes[2].meta.FSM().Database("after"); return err == nil })
}

// TestDecommissionNode decommissions node 1 of four, which leads the
// metadata group and holds a replica of every bucket: writes go on, its
// replicas move to node 4 (the only active node free), its vote passes to
// node 4 and it leaves the metadata group, holding nothing; the buckets end
// with every row on identical replicas. A second decommission that would
// leave buckets nowhere to go is refused, and undrain brings node 1 back.
// Decommissioned again and stopped, it is forgotten.
func TestDecommissionNode(t *testing.T) {
	longCluster(t)
	nodes, _ := opsCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if !nodes[0].meta.IsLeader() {
		t.Fatal("node 1 does not lead the metadata group")
	}
	c := retryClient(nodes[1])
	const buckets = 6
	tableID := tableBesideNode(t, ctx, nodes, c, 4, buckets, 3) // on nodes 1, 2 and 3
	appendTo(t, ctx, c, buckets, 0, 30)

	if err := nodes[1].DecommissionNode(ctx, 1); err != nil {
		t.Fatalf("decommission node 1: %v", err)
	}
	appendTo(t, ctx, c, buckets, 30, 60) // while the replicas move
	waitFor(t, 60*time.Second, func() bool {
		for _, a := range nodes[1].meta.Assignments() {
			if slices.Contains(a.Replicas, 1) {
				return false
			}
		}
		return metaMembers(nodes[1]) == "2:voter 3:voter 4:voter"
	})
	if got := nodes[0].localStats(false).Replicas; got != 0 {
		t.Fatalf("node 1 still has %d replicas open after leaving the metadata group", got)
	}
	if st := nodeState(nodes[1], 1); st != raftmeta.NodeDecommissioning {
		t.Fatalf("node 1 is %q in the catalog after its decommission, want decommissioning", st)
	}
	if ni := nodeInfo(ctx, c, 1); ni == nil || ni.State != string(StateDecommissioned) || ni.MetaRole != "none" {
		t.Fatalf("DescribeCluster after the decommission, node 1: %+v, want decommissioned and no metadata role", ni)
	}
	live := []*Node{nil, nodes[1], nodes[2], nodes[3]}
	waitFor(t, 30*time.Second, func() bool { return healed(live, tableID) })
	checkReplicasIdentical(t, live, tableID)
	checkRows(t, ctx, c, buckets, 60)

	// Three active nodes left for buckets of three replicas: nowhere to
	// move node 2's.
	if err := nodes[1].DecommissionNode(ctx, 2); !errors.Is(err, raftmeta.ErrNoRoom) {
		t.Fatalf("decommission of node 2 with no room: %v, want ErrNoRoom", err)
	}
	if st := nodeState(nodes[1], 2); st != raftmeta.NodeActive {
		t.Fatalf("node 2 is %q after a refused decommission", st)
	}

	// Undrain stops (here: undoes) the decommission: active again, back in
	// the metadata group (as a non-voter: it has its three voters).
	if err := nodes[1].UndrainNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool {
		return nodeState(nodes[1], 1) == raftmeta.NodeActive && metaMembers(nodes[1]) == "1:nonvoter 2:voter 3:voter 4:voter"
	})

	// Decommissioned again (it holds nothing now) and stopped, node 1 is
	// forgotten once down for the grace period (2 s here); its machine
	// then joins afresh under its old id: a new member, active.
	if err := nodes[1].DecommissionNode(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return metaMembers(nodes[1]) == "2:voter 3:voter 4:voter" })
	if _, err := nodes[1].meta.Node(1); err != nil {
		t.Fatalf("node 1 left the catalog while it ran: %v", err)
	}
	if err := nodes[0].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool {
		_, err := nodes[1].meta.Node(1)
		return errors.Is(err, raftmeta.ErrNodeNotFound) && nodeInfo(ctx, c, 1) == nil
	})
	cfg := clusterConfig(t.TempDir())
	cfg.NodeID = 1
	cfg.Join = []string{nodes[1].peers.Addr()}
	nodes[0] = startCluster(t, cfg)
	t.Cleanup(func() { nodes[0].Close() }) // before its directory goes
	waitFor(t, 30*time.Second, func() bool {
		return nodeState(nodes[1], 1) == raftmeta.NodeActive && metaMembers(nodes[1]) == "1:nonvoter 2:voter 3:voter 4:voter"
	})
}

// TestForgetNeedsTheFeatureLevel: a decommissioned node that stopped is
// not forgotten while an alive node runs a binary without the forget_node
// command (it could not apply it), and is once that node is gone; its id,
// the highest, is not given to the next node that joins.
func TestForgetNeedsTheFeatureLevel(t *testing.T) {
	longCluster(t)
	nodes, _ := opsCluster(t, 2)
	join := func(level uint32) *Node {
		t.Helper()
		cfg := clusterConfig(t.TempDir())
		cfg.Cluster.DeadNodeGrace = Duration{2 * time.Second}
		cfg.Join = []string{nodes[0].peers.Addr()}
		nd, err := New(cfg, testLogger())
		if err != nil {
			t.Fatal(err)
		}
		nd.gossipProfile = membership.ProfileLocal
		nd.featureLevel = level
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := nd.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		return nd
	}
	old := join(featureDecommission) // node 3
	fourth := join(featureLevel)     // node 4
	if old.ID() != 3 || fourth.ID() != 4 {
		t.Fatalf("nodes joined as %d and %d, want 3 and 4", old.ID(), fourth.ID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitFor(t, 20*time.Second, func() bool {
		return len(nodes[0].members()) == 4 && nodes[0].clusterFeatureLevel() == featureDecommission
	})
	if err := nodes[0].DecommissionNode(ctx, 4); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return !strings.Contains(metaMembers(nodes[0]), "4:") })
	if err := fourth.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * nodes[0].cfg.Cluster.DeadNodeGrace.Duration)
	if _, err := nodes[0].meta.Node(4); err != nil {
		t.Fatalf("node 4 forgotten beside a binary without forget_node: %v", err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool {
		_, err := nodes[0].meta.Node(4)
		return errors.Is(err, raftmeta.ErrNodeNotFound)
	})
	if next := join(featureLevel); next.ID() != 5 {
		t.Fatalf("the node joining after node 4 was forgotten got id %d, want 5", next.ID())
	}
}

// TestChangeReplicationFactor: AlterTable raises a table's replication
// factor from 1 to 3 while it is written, then lowers it to 2; the
// controller adds and removes replicas, and each time every bucket's group
// ends with that many voters holding identical rows and every row.
func TestChangeReplicationFactor(t *testing.T) {
	longCluster(t)
	nodes, _ := opsCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := retryClient(nodes[0])
	const buckets = 4
	tableID := createTWith(t, ctx, c, buckets, 1)
	appendTo(t, ctx, c, buckets, 0, 40)
	if err := c.SetTableProperties(ctx, "db.t", map[string]string{"table.replication.factor": "3"}); err != nil {
		t.Fatal(err)
	}
	// settled waits until every bucket has rf voting replicas with
	// identical rows, and checks the first rows rows are there.
	settled := func(rf, rows int) {
		t.Helper()
		waitFor(t, 60*time.Second, func() bool {
			for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
				if len(a.Replicas) != rf {
					return false
				}
			}
			return healed(nodes, tableID)
		})
		checkReplicasIdentical(t, nodes, tableID)
		checkRows(t, ctx, c, buckets, rows)
	}
	appendTo(t, ctx, c, buckets, 40, 80) // while the replicas are added
	settled(3, 80)

	if err := c.SetTableProperties(ctx, "db.t", map[string]string{"table.replication.factor": "2"}); err != nil {
		t.Fatal(err)
	}
	appendTo(t, ctx, c, buckets, 80, 120) // while the replicas are removed
	settled(2, 120)
	waitFor(t, 30*time.Second, func() bool { // the removed replicas close
		var open int32
		for _, nd := range nodes {
			open += nd.localStats(false).Replicas
		}
		return open == 2*buckets
	})
}

// TestSurplusVoterDemoted undoes a decommission after the node's vote
// passed to a non-voter: the group then has four voters for meta_voters =
// 3, and the controller demotes one, the node that is down, and leaves it
// at that (promote does not put it back).
func TestSurplusVoterDemoted(t *testing.T) {
	longCluster(t)
	nodes, _ := opsClusterWith(t, 4, func(c *Config) {
		// Node 3 stays down, and so in the group, for the whole test.
		c.Cluster.DeadNodeGrace = Duration{time.Minute}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitFor(t, 20*time.Second, func() bool { return metaMembers(nodes[0]) == "1:voter 2:voter 3:voter 4:nonvoter" })
	// Stopped, node 3 cannot report that it holds nothing: decommissioning,
	// it stays in the group.
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return !nodes[0].aliveNodes(ctx, nodes[0].meta.Nodes())[3] })
	if err := nodes[0].DecommissionNode(ctx, 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return metaMembers(nodes[0]) == "1:voter 2:voter 3:voter 4:voter" })
	if err := nodes[0].UndrainNode(ctx, 3); err != nil {
		t.Fatal(err)
	}
	const want = "1:voter 2:voter 3:nonvoter 4:voter"
	waitFor(t, 20*time.Second, func() bool { return metaMembers(nodes[0]) == want })
	time.Sleep(3 * controllerInterval)
	if got := metaMembers(nodes[0]); got != want {
		t.Fatalf("metadata group %q a while after the demotion, want %q", got, want)
	}
}

func TestSurplusVoter(t *testing.T) {
	servers := func(voters ...int) []raft.Server {
		var out []raft.Server
		for _, id := range voters {
			out = append(out, raft.Server{ID: nodeServer(raftmeta.NodeID(id)), Suffrage: raft.Voter})
		}
		return append(out, raft.Server{ID: "9", Suffrage: raft.Nonvoter})
	}
	leaving := map[raftmeta.NodeID]raftmeta.NodeState{4: raftmeta.NodeDecommissioning}
	up := func(ids ...int) map[raftmeta.NodeID]bool {
		m := map[raftmeta.NodeID]bool{}
		for _, id := range ids {
			m[raftmeta.NodeID(id)] = true
		}
		return m
	}
	for _, tt := range []struct {
		name    string
		servers []raft.Server
		state   map[raftmeta.NodeID]raftmeta.NodeState
		alive   map[raftmeta.NodeID]bool
		self    raftmeta.NodeID
		want    raftmeta.NodeID // 0: none
	}{
		{"as many as wanted", servers(1, 2, 3), nil, up(1, 2, 3), 1, 0},
		{"fewer", servers(1, 2), nil, up(1, 2), 1, 0},
		{"one more: the highest id", servers(1, 2, 3, 5), nil, up(1, 2, 3, 5), 1, 5},
		{"one more: a down one first", servers(1, 2, 3, 5), nil, up(1, 3, 5), 1, 2},
		{"never self", servers(1, 2, 3, 5), nil, up(1, 2, 3, 5), 5, 3},
		{"never self, even down", servers(1, 2, 3, 5), nil, up(1, 2, 3), 5, 3},
		{"a decommissioning voter does not count", servers(1, 2, 3, 4), leaving, up(1, 2, 3, 4), 1, 0},
		{"nor is it demoted", servers(1, 2, 3, 4, 5), leaving, up(1, 2, 3, 5), 1, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := surplusVoter(tt.servers, tt.state, tt.alive, tt.self, 3)
			if ok != (tt.want != 0) || got != tt.want {
				t.Fatalf("surplusVoter = %d, %v; want %d", got, ok, tt.want)
			}
		})
	}
}

// metaMembers is the metadata group's configuration as n's leader sees
// it, "id:voter" or "id:nonvoter" in id order ("" when n cannot tell).
func metaMembers(n *Node) string {
	servers, err := n.meta.Servers()
	if err != nil {
		return ""
	}
	var out []string
	for _, s := range servers {
		role := "voter"
		if s.Suffrage != raft.Voter {
			role = "nonvoter"
		}
		out = append(out, string(s.ID)+":"+role)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// tableBesideNode creates db.t (BIGINT id, STRING s) with buckets buckets
// of rf replicas while node empty is drained, so that it holds none of
// them, then undrains it. It returns the table id.
func tableBesideNode(t *testing.T, ctx context.Context, nodes []*Node, c *client.Client, empty raftmeta.NodeID, buckets int32, rf int) int64 {
	t.Helper()
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].DrainNode(ctx, empty); err != nil {
		t.Fatal(err)
	}
	tableID, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "s", Type: "STRING"}}},
		BucketCount: buckets,
		Properties:  map[string]string{"table.replication.factor": strconv.Itoa(rf)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].UndrainNode(ctx, empty); err != nil {
		t.Fatal(err)
	}
	return tableID
}

// nodeState is node id's state in n's catalog ("" if absent).
func nodeState(n *Node, id raftmeta.NodeID) raftmeta.NodeState {
	for _, m := range n.meta.Nodes() {
		if m.ID == id {
			return m.State
		}
	}
	return ""
}

// healed reports whether every bucket of the table has a leader among
// nodes whose Raft configuration is exactly its assignment, all voters.
func healed(nodes []*Node, tableID int64) bool {
	var ref *Node
	for _, nd := range nodes {
		if nd != nil {
			ref = nd
			break
		}
	}
	for _, a := range ref.meta.AssignmentsForTable(tableID) {
		ok := false
		for _, nd := range nodes {
			if nd == nil {
				continue
			}
			r := nd.replica(a.BucketID)
			if r == nil || !r.IsLeader() {
				continue
			}
			f := r.Raft().GetConfiguration()
			if f.Error() != nil {
				return false
			}
			var got []raftmeta.NodeID
			for _, s := range f.Configuration().Servers {
				if s.Suffrage != raft.Voter {
					return false
				}
				got = append(got, serverNode(s.ID))
			}
			ok = raftmeta.SameReplicas(got, a.Replicas)
		}
		if !ok {
			return false
		}
	}
	return true
}

// TestClusterRebalance: a table placed on 3 nodes is spread over a fourth
// by `cluster rebalance` (through the Admin API), with writes going on;
// replicas end identical with every acknowledged row, and a second run
// once settled moves nothing more than the first left to do.
func TestClusterRebalance(t *testing.T) {
	longCluster(t)
	nodes, _ := opsCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := retryClient(nodes[0])
	const buckets = 8
	tableID := tableBesideNode(t, ctx, nodes, c, 4, buckets, 3)
	appendTo(t, ctx, c, buckets, 0, 24)
	c4 := retryClient(nodes[3])
	res, err := c4.Admin().Rebalance(ctx, connect.NewRequest(&flussv1.RebalanceRequest{}))
	if err != nil {
		t.Fatalf("rebalance: %v", err)
	}
	// 24 replicas over 4 nodes: node 4 gets 6, one per bucket at most.
	if res.Msg.Moved != 6 {
		t.Fatalf("rebalance moved %d replicas, want 6", res.Msg.Moved)
	}
	appendTo(t, ctx, c4, buckets, 24, 48)
	waitFor(t, 60*time.Second, func() bool { return healed(nodes, tableID) })
	counts := map[raftmeta.NodeID]int{}
	for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
		for _, r := range a.Replicas {
			counts[r]++
		}
	}
	for id := raftmeta.NodeID(1); id <= 4; id++ {
		if counts[id] != 6 {
			t.Fatalf("replicas per node after rebalance: %v, want 6 each", counts)
		}
	}
	checkReplicasIdentical(t, nodes, tableID)
	checkRows(t, ctx, c, buckets, 48)
	res, err = c.Admin().Rebalance(ctx, connect.NewRequest(&flussv1.RebalanceRequest{}))
	if err != nil || res.Msg.Moved != 0 {
		t.Fatalf("second rebalance: moved %v, %v; want 0", res, err)
	}
}

// TestClusterRebalanceSmallReplicationFactors: buckets of one and of two
// replicas move too. A replica that moves away keeps serving until its
// group has dropped it (a one-replica bucket has no other copy until the
// new one caught up), leads the handover when it leads, then closes and
// deletes its data. Writes go on throughout; every acknowledged row stays.
func TestClusterRebalanceSmallReplicationFactors(t *testing.T) {
	longCluster(t)
	for _, rf := range []int{1, 2} {
		t.Run(fmt.Sprintf("rf%d", rf), func(t *testing.T) {
			nodes, _ := opsCluster(t, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			c := retryClient(nodes[0])
			const buckets = 6
			tableID := tableBesideNode(t, ctx, nodes, c, 3, buckets, rf)
			appendTo(t, ctx, c, buckets, 0, 30)
			before := map[raftmeta.BucketID][]raftmeta.NodeID{}
			for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
				before[a.BucketID] = a.Replicas
			}
			res, err := c.Admin().Rebalance(ctx, connect.NewRequest(&flussv1.RebalanceRequest{}))
			if err != nil {
				t.Fatalf("rebalance: %v", err)
			}
			// 6·rf replicas over 3 nodes: node 3 gets 2·rf, one per bucket at most.
			if res.Msg.Moved != int32(2*rf) {
				t.Fatalf("rebalance moved %d replicas, want %d", res.Msg.Moved, 2*rf)
			}
			appendTo(t, ctx, c, buckets, 30, 60)
			waitFor(t, 60*time.Second, func() bool { return healed(nodes, tableID) })
			// Every node that lost a bucket closes its replica and deletes
			// its data; every node holding one has it open.
			waitFor(t, 30*time.Second, func() bool {
				for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
					for i, nd := range nodes {
						held := slices.Contains(a.Replicas, raftmeta.NodeID(i+1))
						if (nd.replica(a.BucketID) != nil) != held || nd.hasBucketDir(a.BucketID) != held {
							return false
						}
					}
				}
				return true
			})
			moved := 0
			for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
				if !raftmeta.SameReplicas(a.Replicas, before[a.BucketID]) {
					moved++
				}
			}
			if moved != 2*rf {
				t.Fatalf("%d buckets changed replicas, want %d", moved, 2*rf)
			}
			checkReplicasIdentical(t, nodes, tableID)
			checkRows(t, ctx, c, buckets, 60)
		})
	}
}

// TestClusterGrowsReplicasToTheFactor: a table created with replication
// factor 3 on a one-node cluster (placed on that node alone) gets its two
// missing replicas once two nodes have joined, without an operator: every
// bucket group ends with three voters, the replicas byte-identical, and
// writes and reads go on.
func TestClusterGrowsReplicasToTheFactor(t *testing.T) {
	longCluster(t)
	nodes, _ := opsCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := retryClient(nodes[0])
	const buckets = 3
	tableID := createT(t, ctx, c, buckets)
	for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
		if len(a.Replicas) != 1 {
			t.Fatalf("bucket %d placed on %v with one active node", a.Bucket, a.Replicas)
		}
	}
	appendTo(t, ctx, c, buckets, 0, 9)
	for i := 1; i < 3; i++ {
		cfg := clusterConfig(t.TempDir()) // before the cleanup below: it runs first
		cfg.Join = []string{nodes[0].peers.Addr()}
		n := startCluster(t, cfg)
		t.Cleanup(func() { n.Close() })
		if n.ID() != raftmeta.NodeID(i+1) {
			t.Fatalf("joined node got id %d, want %d", n.ID(), i+1)
		}
		nodes = append(nodes, n)
	}
	waitFor(t, 60*time.Second, func() bool {
		for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
			if len(a.Replicas) != 3 {
				return false
			}
		}
		return true
	})
	// Every group's leader has the three replicas as voters.
	waitFor(t, 60*time.Second, func() bool {
		for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
			voters := -1
			for _, n := range nodes {
				if r := n.replica(a.BucketID); r != nil && r.IsLeader() {
					f := r.Raft().GetConfiguration()
					if f.Error() != nil {
						return false
					}
					voters = 0
					for _, s := range f.Configuration().Servers {
						if s.Suffrage == raft.Voter {
							voters++
						}
					}
				}
			}
			if voters != 3 {
				return false
			}
		}
		return true
	})
	checkReplicasIdentical(t, nodes, tableID)
	// The preferred leaders, all on node 1 when the table was placed,
	// spread over the three nodes, and the leaderships follow.
	waitFor(t, 60*time.Second, func() bool {
		leaders := map[raftmeta.NodeID]bool{}
		for _, a := range nodes[0].meta.AssignmentsForTable(tableID) {
			pref := a.Replicas[0]
			if r := nodes[pref-1].replica(a.BucketID); r == nil || !r.IsLeader() {
				return false
			}
			leaders[pref] = true
		}
		return len(leaders) == 3
	})
	appendTo(t, ctx, retryClient(nodes[2]), buckets, 9, 12)
	checkRows(t, ctx, c, buckets, 12)
	checkReplicasIdentical(t, nodes, tableID)
}

// TestAliveNodes asks about catalog nodes gossip does not know: this node
// is up, nodes whose peer address refuses or never answers are not, and
// the one that answers node.hello is; all are in the answer.
func TestAliveNodes(t *testing.T) {
	nodes, _ := opsCluster(t, 2)
	n := nodes[0]
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	ask := []raftmeta.Node{
		{ID: n.ID()},
		{ID: 7, PeerAddr: nodes[1].peers.Addr()},
		{ID: 8, PeerAddr: silent.Addr().String()},
		{ID: 9, PeerAddr: silent.Addr().String()},
		{ID: 10, PeerAddr: nodetest.FreeAddr()}, // nothing listens
	}
	got := n.aliveNodes(context.Background(), ask)
	want := map[raftmeta.NodeID]bool{n.ID(): true, 7: true, 8: false, 9: false, 10: false}
	if !maps.Equal(got, want) {
		t.Fatalf("aliveNodes: %v, want %v", got, want)
	}
}
