package node

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// TestClusterConfigHeldByTheCluster: the metadata group's size is the
// catalog's meta_voters, recorded from the first leader's configuration
// and changed through SetClusterConfig, whatever the other nodes are
// configured with: a leader configured otherwise neither promotes nor
// demotes to its own value. The grace period before a down node's
// replicas move is the catalog's too.
func TestClusterConfigHeldByTheCluster(t *testing.T) {
	longCluster(t)
	started := 0
	nodes, _ := opsClusterWith(t, 4, func(c *Config) {
		started++
		c.MetaVoters = 3 // nodes 2 to 4
		if started == 1 {
			c.MetaVoters = 2 // node 1, which bootstraps and leads first
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	waitFor(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			if n.meta.ClusterConfig() != (raftmeta.ClusterConfig{MetaVoters: 2, DeadNodeGrace: 2 * time.Second, DefaultLogTTL: 7 * 24 * time.Hour, LakeSnapshotRetention: time.Hour}) {
				return false
			}
		}
		return metaMembers(nodes[0]) == "1:voter 2:voter 3:nonvoter 4:nonvoter"
	})

	// Through a node that does not lead: forwarded to the leader, and
	// answered once the answering node's catalog has it.
	c := retryClient(nodes[3]).Admin()
	setVoters := func(v int32) (*connect.Response[flussv1.SetClusterConfigResponse], error) {
		return c.SetClusterConfig(ctx, connect.NewRequest(&flussv1.SetClusterConfigRequest{MetaVoters: &v}))
	}
	res, err := setVoters(3)
	if err != nil || res.Msg.MetaVoters != 3 {
		t.Fatalf("SetClusterConfig(meta_voters 3) = %v, %v", res, err)
	}
	waitFor(t, 20*time.Second, func() bool { return metaMembers(nodes[0]) == "1:voter 2:voter 3:voter 4:nonvoter" })
	for _, v := range []int32{0, -1, raftmeta.MaxMetaVoters + 1} {
		if _, err := setVoters(v); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("SetClusterConfig(meta_voters %d) = %v, want invalid_argument", v, err)
		}
	}
	res, err = c.SetClusterConfig(ctx, connect.NewRequest(&flussv1.SetClusterConfigRequest{}))
	if err != nil || res.Msg.MetaVoters != 3 {
		t.Fatalf("SetClusterConfig({}) = %v, %v; want meta_voters 3 unchanged", res, err)
	}
	d, err := c.DescribeCluster(ctx, connect.NewRequest(&flussv1.DescribeClusterRequest{}))
	if err != nil || d.Msg.MetaVoters != 3 {
		t.Fatalf("DescribeCluster = %v, %v; want meta_voters 3", d, err)
	}

	// Down to 2: the highest voter that does not lead is demoted.
	if _, err := setVoters(2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return metaMembers(nodes[0]) == "1:voter 2:voter 3:nonvoter 4:nonvoter" })

	// Node 2, configured with 3, takes the lead and keeps the group at 2.
	if !nodes[0].meta.IsLeader() {
		t.Fatalf("node 1 no longer leads the metadata group")
	}
	if err := nodes[0].meta.Raft().LeadershipTransferToServer(raft.ServerID("2"), raft.ServerAddress(nodes[1].peers.Addr())).Error(); err != nil {
		t.Fatalf("hand the metadata leadership to node 2: %v", err)
	}
	waitFor(t, 10*time.Second, nodes[1].meta.IsLeader)
	time.Sleep(3 * controllerInterval)
	if got, want := metaMembers(nodes[1]), "1:voter 2:voter 3:nonvoter 4:nonvoter"; got != want {
		t.Fatalf("metadata group %q under a leader configured with meta_voters 3, want %q", got, want)
	}
	if v := nodes[1].meta.ClusterConfig().MetaVoters; v != 2 {
		t.Fatalf("catalog meta_voters %d after the leader change, want 2", v)
	}

	// A grace period of an hour, set through the API, holds a stopped node
	// in place although every node is configured with 2 s; one of a
	// second lets it go.
	setGrace := func(d time.Duration) {
		t.Helper()
		ms := d.Milliseconds()
		// Retried while unavailable (as a client would: the change is
		// idempotent): under the race detector the metadata leadership
		// can move again just after the transfer above.
		var res *connect.Response[flussv1.SetClusterConfigResponse]
		var err error
		for range 40 {
			res, err = c.SetClusterConfig(ctx, connect.NewRequest(&flussv1.SetClusterConfigRequest{DeadNodeGraceMs: &ms}))
			if connect.CodeOf(err) != connect.CodeUnavailable {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil || res.Msg.DeadNodeGraceMs != ms || res.Msg.MetaVoters != 2 {
			t.Fatalf("SetClusterConfig(dead_node_grace %v) = %v, %v", d, res, err)
		}
	}
	setGrace(time.Hour)
	for _, ms := range []int64{999, -1, 1 << 62} {
		if _, err := c.SetClusterConfig(ctx, connect.NewRequest(&flussv1.SetClusterConfigRequest{DeadNodeGraceMs: &ms})); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("SetClusterConfig(deadNodeGraceMs %d) = %v, want invalid_argument", ms, err)
		}
	}
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return !nodes[1].aliveNodes(ctx, nodes[1].meta.Nodes())[3] })
	time.Sleep(3 * nodes[1].cfg.Cluster.DeadNodeGrace.Duration)
	if s := nodeState(nodes[1], 3); s != raftmeta.NodeActive {
		t.Fatalf("node 3, down for 6 s of a grace period of an hour, is %s", s)
	}
	setGrace(time.Second)
	waitFor(t, 20*time.Second, func() bool { return nodeState(nodes[1], 3) == raftmeta.NodeLeft })

	// The retention of a table without table.log.ttl is the cluster's on
	// every replica, whatever the nodes are configured with.
	tableID := createTWith(t, ctx, retryClient(nodes[1]), 1, 3)
	ms := time.Hour.Milliseconds()
	if res, err := c.SetClusterConfig(ctx, connect.NewRequest(&flussv1.SetClusterConfigRequest{DefaultLogTtlMs: &ms})); err != nil || res.Msg.DefaultLogTtlMs != ms {
		t.Fatalf("SetClusterConfig(default_log_ttl 1h) = %v, %v", res, err)
	}
	for _, n := range []*Node{nodes[0], nodes[1], nodes[3]} {
		waitFor(t, 10*time.Second, func() bool { return n.tableTTL(tableID) == time.Hour })
	}
	short := int64(999)
	if _, err := c.SetClusterConfig(ctx, connect.NewRequest(&flussv1.SetClusterConfigRequest{DefaultLogTtlMs: &short})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("SetClusterConfig(defaultLogTtlMs 999) = %v, want invalid_argument", err)
	}
}

// TestClusterConfigNeedsTheFeatureLevel: beside a binary that cannot read the
// set_meta_voters command, the catalog holds none (nodes go by their
// configuration) and SetClusterConfig is refused; once every node runs
// this binary, the leader records its configured value.
func TestClusterConfigNeedsTheFeatureLevel(t *testing.T) {
	cfg1 := clusterConfig(t.TempDir())
	cfg1.MetaVoters = 2
	old := startNodeWith(t, cfg1, func(n *Node) { n.featureLevel = featurePKColumns })
	t.Cleanup(func() { old.Close() })
	cfg2 := clusterConfig(t.TempDir())
	cfg2.Join = []string{old.peers.Addr()}
	cur := startCluster(t, cfg2)
	t.Cleanup(func() { cur.Close() })
	waitFor(t, 20*time.Second, func() bool {
		return metaMembers(cur) == "1:voter 2:voter" && cur.clusterFeatureLevel() == featurePKColumns
	})
	// The new node leads, beside the old one.
	if err := old.meta.Raft().LeadershipTransferToServer(raft.ServerID(strconv.Itoa(int(cur.ID()))), raft.ServerAddress(cur.peers.Addr())).Error(); err != nil {
		t.Fatalf("hand the metadata leadership to node %d: %v", cur.ID(), err)
	}
	waitFor(t, 10*time.Second, cur.meta.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v := 3
	if _, err := cur.SetClusterConfig(ctx, rpc.ClusterConfigChange{MetaVoters: &v}); !errors.Is(err, raftmeta.ErrFeatureLevel) {
		t.Fatalf("SetClusterConfig beside an older node = %v, want ErrFeatureLevel", err)
	}
	time.Sleep(3 * controllerInterval)
	if got := cur.meta.ClusterConfig(); got != (raftmeta.ClusterConfig{}) {
		t.Fatalf("catalog settings %+v recorded beside an older node, want none", got)
	}
	if got, want := cur.clusterConfig(), cur.configuredClusterConfig(); got != want {
		t.Fatalf("settings in force %+v, want the configured %+v", got, want)
	}

	// Node 1 upgraded (restarted with this binary's level): whichever node
	// leads then records its configured value.
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	cfg1.PeerAddr = old.peers.Addr()
	upgraded := startCluster(t, cfg1)
	t.Cleanup(func() { upgraded.Close() })
	waitFor(t, 30*time.Second, func() bool {
		v := cur.meta.ClusterConfig()
		return (v.MetaVoters == cfg1.MetaVoters || v.MetaVoters == cfg2.MetaVoters) && v.DeadNodeGrace == cfg2.Cluster.DeadNodeGrace.Duration &&
			upgraded.meta.ClusterConfig() == v
	})
}
