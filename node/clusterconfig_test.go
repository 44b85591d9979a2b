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

// TestMetaVotersHeldByTheCluster: the metadata group's size is the
// catalog's meta_voters, recorded from the first leader's configuration
// and changed through SetClusterConfig, whatever the other nodes are
// configured with: a leader configured otherwise neither promotes nor
// demotes to its own value.
func TestMetaVotersHeldByTheCluster(t *testing.T) {
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
			if n.meta.MetaVoters() != 2 {
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
	if v := nodes[1].meta.MetaVoters(); v != 2 {
		t.Fatalf("catalog meta_voters %d after the leader change, want 2", v)
	}
}

// TestMetaVotersNeedTheFeatureLevel: beside a binary that cannot read the
// set_meta_voters command, the catalog holds none (nodes go by their
// configuration) and SetClusterConfig is refused; once every node runs
// this binary, the leader records its configured value.
func TestMetaVotersNeedTheFeatureLevel(t *testing.T) {
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
	if got := cur.meta.MetaVoters(); got != 0 {
		t.Fatalf("catalog meta_voters %d recorded beside an older node, want none", got)
	}
	if got := cur.metaVoters(); got != cfg2.MetaVoters {
		t.Fatalf("meta_voters in force %d, want the configured %d", got, cfg2.MetaVoters)
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
		v := cur.meta.MetaVoters()
		return (v == cfg1.MetaVoters || v == cfg2.MetaVoters) && upgraded.meta.MetaVoters() == v
	})
}
