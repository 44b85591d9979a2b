package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// TestCloseHandsOffLeadership stops the node that leads the metadata group
// and a bucket, with a heartbeat timeout of 5 s: without a handoff its
// groups would go leaderless for at least that long. Right after Close
// the metadata group has a leader on another node, and every bucket the
// node led takes appends within 2 s through another node.
func TestCloseHandsOffLeadership(t *testing.T) {
	nodes, _ := startThreeNodes(t, func(c *Config) {
		c.Raft.HeartbeatTimeout = Duration{5 * time.Second}
		c.Raft.ElectionTimeout = Duration{5 * time.Second}
		c.Raft.ReplicaMaxLag = Duration{40 * time.Second}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var x *Node
	for _, n := range nodes {
		if n.meta.IsLeader() {
			x = n
		}
	}
	if x == nil {
		t.Fatal("no node leads the metadata group")
	}
	var other *Node
	for _, n := range nodes {
		if n != x {
			other = n
			break
		}
	}
	c := retryClient(other)
	const buckets = 6
	id := createT(t, ctx, c, buckets)
	appendTo(t, ctx, c, buckets, 0, 12)
	// The leaders settle on their preferred replicas: x leads some.
	var led []int32
	waitNodes(t, ctx, c, other.meta, 60*time.Second, fmt.Sprintf("node %d leads 2 buckets", x.ID()), func(map[int32]*flussv1.NodeInfo) bool {
		led = led[:0]
		for _, a := range x.meta.AssignmentsForTable(id) {
			if r := x.replica(a.BucketID); r != nil && r.IsLeader() {
				led = append(led, a.Bucket)
			}
		}
		return len(led) == 2
	})

	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	for {
		if l, _ := other.meta.Leader(); l != 0 && l != x.ID() {
			break
		}
		if time.Since(closed) > 500*time.Millisecond {
			t.Fatalf("no metadata leader 500 ms after node %d (the leader) closed: not handed off", x.ID())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i, b := range led {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.AppendRequest(actx, &flussv1.AppendRequest{Table: "db.t", Bucket: &b,
			Rows: []byte(fmt.Sprintf(`[{"id":%d,"s":"row %d"}]`, 12+i, 12+i))})
		acancel()
		if err != nil {
			t.Fatalf("append to bucket %d, led by node %d before it closed: %v", b, x.ID(), err)
		}
	}
	if l, _ := other.meta.Leader(); l == raftmeta.NodeID(0) {
		t.Fatal("the metadata group lost its leader again")
	}
}
