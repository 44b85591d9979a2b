package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/rpc"
)

// TestAwaitCatalogRefusesStaleReads: until this node's registration is
// applied, a catalog read waits metaLeaderWait and is then refused as
// behind (unavailable: retry), never answered from a stale catalog; a
// caller's own deadline ends the wait with its error; once registered,
// reads go ahead at once.
func TestAwaitCatalogRefusesStaleReads(t *testing.T) {
	n := &Node{registered: make(chan struct{}), cfg: Default()}
	start := time.Now()
	if err := n.awaitCatalog(context.Background()); !errors.Is(err, rpc.ErrCatalogBehind) {
		t.Fatalf("unregistered node: awaitCatalog = %v, want ErrCatalogBehind", err)
	}
	if waited := time.Since(start); waited < metaLeaderWait {
		t.Fatalf("refused after %v, before metaLeaderWait (%v)", waited, metaLeaderWait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.awaitCatalog(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with a short deadline: awaitCatalog = %v, want the deadline", err)
	}
	close(n.registered)
	if err := n.awaitCatalog(context.Background()); err != nil {
		t.Fatalf("registered node: awaitCatalog = %v", err)
	}
}
