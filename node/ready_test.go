package node

import (
	"context"
	"slices"
	"testing"
	"time"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// A restarted node is not ready before it has replayed its catalog and
// opened every replica assigned to it, each with a leader: /readyz is what
// a rolling restart waits for between nodes.
func TestNotReadyBeforeEveryReplicaIsOpen(t *testing.T) {
	const buckets = 32
	dir := t.TempDir()
	cfg := testConfig(dir)
	n := startNode(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New("http://" + n.ClientAddr())
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: buckets,
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return n.Ready() == nil })
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n = startNode(t, cfg)
	defer n.Close()
	for polls := 0; ; polls++ {
		if ctx.Err() != nil {
			t.Fatalf("not ready after %d polls: %v", polls, n.Ready())
		}
		if n.Ready() != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		var unserved []string
		for _, a := range n.meta.Assignments() {
			if slices.Contains(a.Replicas, n.id) {
				r := n.replica(a.BucketID)
				switch {
				case r == nil:
					unserved = append(unserved, a.BucketID.String()+" not open")
				case r.Leader() == "":
					unserved = append(unserved, a.BucketID.String()+" without a leader")
				}
			}
		}
		if got := len(n.meta.Assignments()); got != buckets {
			t.Fatalf("ready with %d buckets in the catalog, want %d", got, buckets)
		}
		if len(unserved) > 0 {
			t.Fatalf("ready while %v", unserved)
		}
		t.Logf("ready after %d polls", polls)
		return
	}
}
