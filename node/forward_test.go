package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/replica"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestListOffsetLocalNeedsServingReads: a replica that does not serve reads
// (here a group without a configuration, so without a leader; after a
// restart, also a leader before its barrier) answers ListOffsets with a
// retryable error, never with its own applied offsets, which can be behind
// what clients were acknowledged.
func TestListOffsetLocalNeedsServingReads(t *testing.T) {
	addr, tr := raft.NewInmemTransport("")
	r, err := replica.Open(replica.Config{
		ID:        raftmeta.BucketID{TableID: 1, Bucket: 0},
		Dir:       t.TempDir(),
		LocalID:   "1",
		LocalAddr: addr,
		Transport: tr,
		Logger:    testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.ServingReads(); !errors.Is(err, replica.ErrNoLeader) {
		t.Fatalf("ServingReads of a group without a leader = %v, want ErrNoLeader", err)
	}
	for _, spec := range []rpc.OffsetSpec{rpc.OffsetEarliest, rpc.OffsetLatest, rpc.OffsetTimestamp} {
		if off, err := listOffsetLocal(r, spec, 0); !errors.Is(err, replica.ErrNoLeader) {
			t.Errorf("listOffsetLocal(%v) = %d, %v; want ErrNoLeader", spec, off, err)
		}
	}
}

// TestLeaderWithoutQuorumRefusesAtOnce: a bucket leader whose node finds the
// nodes of its followers dead (here they are closed) refuses writes at once
// with `unavailable`, saying why, instead of proposing what it cannot
// commit and holding the request until the client's deadline or its lease
// runs out, and so it does with a write another node forwarded; the node
// forwards nothing to a node it counts dead (the call is not made); it
// still serves Fetch from its log (all of it committed).
func TestLeaderWithoutQuorumRefusesAtOnce(t *testing.T) {
	// A heartbeat timeout long enough that the leader keeps its lease (ten
	// of them) well past the second its node takes to find the others dead.
	nodes, _ := startThreeNodes(t, func(cfg *Config) {
		cfg.Raft.HeartbeatTimeout = Duration{time.Second}
		cfg.Raft.ElectionTimeout = Duration{time.Second}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := retryClient(nodes[0])
	if err := admin.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	tableID, err := admin.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: 1,
		Properties:  map[string]string{"table.replication.factor": "3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	waitLayout(t, ctx, admin, "db.t", "a leader", func(b *flussv1.BucketLayout) bool { return b.Leader != 0 })
	layout, err := admin.GetTableLayout(ctx, "db.t")
	if err != nil {
		t.Fatal(err)
	}
	var lead *Node
	for _, n := range nodes {
		if int32(n.ID()) == layout[0].Leader {
			lead = n
		}
	}
	if _, err := retryClient(lead).Append(ctx, "db.t", []byte(`[{"id":1}]`)); err != nil {
		t.Fatal(err)
	}
	// The leader's node watches its followers' nodes (the pump's
	// heartbeats ask about them), so it finds out when they go silent.
	waitFor(t, 10*time.Second, func() bool {
		for _, n := range nodes {
			if _, watched := lead.live.silence(raft.ServerAddress(n.peers.Addr())); n != lead && !watched {
				return false
			}
		}
		return true
	})
	// The followers' nodes go silent at once (their peer listeners and
	// connections close; the nodes close when the test ends).
	cut := time.Now()
	for _, n := range nodes {
		if n != lead {
			n.peers.Close()
		}
	}
	waitFor(t, 10*time.Second, func() bool {
		for _, n := range nodes {
			if n != lead && lead.live.Alive(raft.ServerAddress(n.peers.Addr())) {
				return false
			}
		}
		return lead.live.anyDead()
	})
	t.Logf("followers' nodes found dead after %v", time.Since(cut).Round(time.Millisecond))

	once := client.New("http://"+lead.ClientAddr(), client.WithRetry(client.Retry{Attempts: 1}))
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	_, err = once.Append(wctx, "db.t", []byte(`[{"id":2}]`))
	if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "reaches the nodes of only 1 of its 3 replicas") {
		led := lead.replica(raftmeta.BucketID{TableID: tableID, Bucket: 0}).IsLeader()
		t.Fatalf("append on a leader cut off from its quorum: %v (still leading: %v), want unavailable saying it reaches too few replicas", err, led)
	}
	// A write forwarded by another node (one that still reaches this one)
	// is refused the same way, marked as never proposed.
	b := raftmeta.BucketID{TableID: tableID, Bucket: 0}
	fwd, err := lead.handleBucket(callBucketWrite)(wctx, appendBucketReq(nil, &bucketReq{Bucket: b, Batches: [][]byte{[]byte("not a batch")}}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeBucketResp(fwd)
	if err != nil {
		t.Fatal(err)
	}
	if rerr := decodeError(p.Code, p.Msg); !errors.Is(rerr, rpc.ErrNoBucketLeader) || !p.Unsent || !strings.Contains(p.Msg, "reaches the nodes of only 1") {
		t.Fatalf("forwarded append on a leader cut off from its quorum: %v (unsent %v), want refused before it was proposed", rerr, p.Unsent)
	}
	// Nor does the node forward anything to a node it counts dead: the
	// call is not made (so the request may go elsewhere), not left to time out.
	for _, n := range nodes {
		if n == lead {
			continue
		}
		_, err := lead.callBucket(wctx, n.ID(), callBucketWrite, &bucketReq{Bucket: b})
		if !errors.Is(err, errPeerDead) || !notSent(err) {
			t.Fatalf("forward to dead node %d: %v, want it not sent (errPeerDead)", n.ID(), err)
		}
	}
	resp, err := once.Fetch(wctx, &flussv1.FetchRequest{Table: "db.t", Bucket: 0, Offset: 0})
	if err != nil {
		t.Fatalf("fetch on a leader cut off from its quorum: %v", err)
	}
	if got := string(resp.GetRows()); !strings.Contains(got, `"id":1`) || strings.Contains(got, `"id":2`) {
		t.Fatalf("fetched %s, want the acknowledged row 1 and not the refused row 2", got)
	}
	// The layout it serves does not name it leader while it cannot
	// commit, although its replica still holds the lease.
	if !lead.replica(b).IsLeader() {
		t.Fatal("the cut-off leader lost its lease already: the layout check below would prove nothing")
	}
	layout, err = once.GetTableLayout(wctx, "db.t")
	if err != nil {
		t.Fatal(err)
	}
	if layout[0].Leader != 0 {
		t.Fatalf("layout served by the cut-off leader names node %d leader, want none", layout[0].Leader)
	}
}
