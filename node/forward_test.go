package node

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
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
