package node

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// TestBucketResetRules: bucket.reset is answered only by the bucket's
// leader, never removes the leader's own replica nor one of a group that
// cannot spare it (fewer than three voters), succeeds at once for a node
// not in the group, and otherwise removes the replica, which the leader
// then adds back (still assigned) and promotes once caught up.
func TestBucketResetRules(t *testing.T) {
	// Timeouts of a second, not the tests' 300 ms: the checks below need
	// one leader throughout, and under -race on a loaded host (CI runs the
	// packages side by side) the leader lost its lease once in the middle
	// of the reset ("leadership lost while committing log").
	nodes, _ := opsClusterWith(t, 3, func(c *Config) {
		c.Raft.HeartbeatTimeout = Duration{time.Second}
		c.Raft.ElectionTimeout = Duration{time.Second}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := retryClient(nodes[0])
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	tables := map[int]int64{}
	for _, rf := range []int{2, 3} {
		id, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
			Table:       "db.rf" + strconv.Itoa(rf),
			Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
			BucketCount: 1,
			Properties:  map[string]string{"table.replication.factor": strconv.Itoa(rf)},
		})
		if err != nil {
			t.Fatal(err)
		}
		tables[rf] = id
	}
	waitFor(t, 30*time.Second, func() bool { return healed(nodes, tables[2]) && healed(nodes, tables[3]) })
	// leaderOf returns the leading node of the table's bucket and a
	// follower's id.
	leaderOf := func(rf int) (raftmeta.BucketID, *Node, *Node, raftmeta.NodeID) {
		a := nodes[0].meta.AssignmentsForTable(tables[rf])[0]
		var leader, other *Node
		for _, nd := range nodes {
			if r := nd.replica(a.BucketID); r != nil && r.IsLeader() {
				leader = nd
			} else if r != nil {
				other = nd
			}
		}
		if leader == nil || other == nil {
			t.Fatalf("table rf%d: no leader and follower among %v", rf, a.Replicas)
		}
		return a.BucketID, leader, other, other.ID()
	}
	reset := func(at *Node, b raftmeta.BucketID, node raftmeta.NodeID) error {
		_, err := at.handleBucketReset(ctx, appendResetReq(nil, b, node))
		return err
	}

	b2, leader2, _, fid2 := leaderOf(2)
	if err := reset(leader2, b2, fid2); err == nil || !strings.Contains(err.Error(), "cannot spare") {
		t.Fatalf("reset in a group of two voters: %v", err)
	}

	b, leader, follower, fid := leaderOf(3)
	if err := reset(follower, b, fid); !errors.Is(err, rpc.ErrNotLeader) {
		t.Fatalf("reset at a follower: %v", err)
	}
	if err := reset(leader, b, leader.ID()); !errors.Is(err, raftmeta.ErrInvalid) {
		t.Fatalf("reset of the leader's own replica: %v", err)
	}
	if err := reset(leader, b, 9); err != nil {
		t.Fatalf("reset of a node not in the group: %v", err)
	}
	if _, err := leader.handleBucketReset(ctx, []byte{1}); err == nil {
		t.Fatal("a malformed bucket.reset was accepted")
	}
	if err := reset(leader, b, fid); err != nil {
		t.Fatalf("reset of a follower: %v", err)
	}
	if healed(nodes, tables[3]) { // it votes only once the leader promotes it again
		t.Fatalf("node %d still votes in the group right after its reset", fid)
	}
	// Still assigned: the leader adds it back and promotes it.
	waitFor(t, 30*time.Second, func() bool { return healed(nodes, tables[3]) })
}
