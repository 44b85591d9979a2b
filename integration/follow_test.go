package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/node/nodetest"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// TestFollowingScanResumesAcrossKillNine: a following Scan of the Go client
// (and so `fluss-node scan --follow`) outlives its node: the node is killed
// with SIGKILL and restarted on the same addresses and data, and the scan
// goes on from where it was, every row delivered once, none skipped.
func TestFollowingScanResumesAcrossKillNine(t *testing.T) {
	longMultiProcess(t)
	dir := t.TempDir()
	ports := []string{"--client-addr", nodetest.FreeAddr(), "--peer-addr", nodetest.FreeAddr(), "--gossip-addr", nodetest.FreeAddr()}
	p := startNode(t, dir, ports...)
	addr := p.addr
	mustCall(t, addr, "AdminService/CreateDatabase", map[string]any{"name": "f"}, nil)
	mustCall(t, addr, "AdminService/CreateTable", map[string]any{
		"table":       "f.t",
		"schema":      map[string]any{"columns": []map[string]any{{"name": "id", "type": "BIGINT", "nullable": false}}},
		"bucketCount": 3,
	}, nil)
	next := 0
	appendRows := func(n int) {
		t.Helper()
		rows := make([]map[string]any, n)
		for i := range rows {
			rows[i] = map[string]any{"id": next}
			next++
		}
		mustCall(t, addr, "WriteService/Append", map[string]any{"table": "f.t", "rows": rows}, nil)
	}
	appendRows(40)

	var (
		mu   sync.Mutex
		seen = map[int]int{} // id → times delivered
	)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := client.New(addr, client.WithRetry(client.Retry{Attempts: 100, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
	scanErr := make(chan error, 1)
	go func() {
		scanErr <- c.Scan(ctx, &flussv1.ScanRequest{Table: "f.t", From: flussv1.ScanRequest_EARLIEST, Follow: true}, func(m *flussv1.ScanResponse) error {
			var rows []struct{ ID int }
			if err := json.Unmarshal(m.GetRows(), &rows); err != nil {
				return fmt.Errorf("rows %q: %w", m.GetRows(), err)
			}
			mu.Lock()
			for _, r := range rows {
				seen[r.ID]++
			}
			mu.Unlock()
			return nil
		})
	}()
	waitFor(t, 30*time.Second, func() error {
		if n := count(); n < 40 {
			return fmt.Errorf("the scan has delivered %d of 40 rows", n)
		}
		return nil
	})

	p.kill()
	p = startNode(t, dir, ports...)
	appendRows(30)
	p.kill() // once more, with rows the scan may not have read yet
	startNode(t, dir, ports...)
	appendRows(30)

	waitFor(t, 60*time.Second, func() error {
		select {
		case err := <-scanErr:
			t.Fatalf("the following scan ended: %v", err)
		default:
		}
		if n := count(); n < next {
			return fmt.Errorf("the scan has delivered %d of %d rows", n, next)
		}
		return nil
	})
	cancel()
	<-scanErr
	mu.Lock()
	defer mu.Unlock()
	for id := range next {
		if seen[id] != 1 {
			t.Errorf("row %d delivered %d times, want once", id, seen[id])
		}
	}
	if len(seen) != next {
		t.Errorf("%d distinct rows delivered, want %d", len(seen), next)
	}
}
