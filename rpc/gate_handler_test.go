package rpc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
	"github.com/fluss-node/fluss-node/rpc/internal/membackend"
)

// holdingBackend holds every Append of more than one row until released,
// and records how many were inside at once.
type holdingBackend struct {
	*membackend.Backend
	release chan struct{}
	inside  atomic.Int32
	most    atomic.Int32
}

func (b *holdingBackend) Append(ctx context.Context, id raftmeta.BucketID, batches [][]byte, writerID int64, seq int32) (rpc.AppendResult, error) {
	if len(batches) == 1 && len(batches[0]) > 4<<10 {
		n := b.inside.Add(1)
		for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
		}
		defer b.inside.Add(-1)
		select {
		case <-b.release:
		case <-ctx.Done():
			return rpc.AppendResult{}, ctx.Err()
		}
	}
	return b.Backend.Append(ctx, id, batches, writerID, seq)
}

// TestLargeRequestsWaitTheirTurn: with max_inflight_request_bytes room for
// one large request, large Appends reach the backend one at a time, small
// ones pass meanwhile, a large one whose deadline passes while it waits is
// refused with nothing stored, and the gauge goes back to 0.
func TestLargeRequestsWaitTheirTurn(t *testing.T) {
	b := &holdingBackend{Backend: membackend.New(), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	url := serveHTTP(t, rpc.NewHandler(b, rpc.Limits{MaxInflightRequestBytes: 300 << 10}, reg, nil))
	// Runs before the server closes: lets any held request go on.
	released := false
	t.Cleanup(func() {
		if !released {
			close(b.release)
		}
	})
	c := client.New(url, client.WithRetry(client.Retry{Attempts: 1}))
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "shop", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "shop.t", BucketCount: 1,
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "s", Type: "STRING"}}}}); err != nil {
		t.Fatal(err)
	}
	// ~200 KiB of rows: one fits in 300 KiB, two do not.
	large := func(first int) []byte {
		var rows bytes.Buffer
		rows.WriteString("[")
		for i := range 2000 {
			if i > 0 {
				rows.WriteString(",")
			}
			fmt.Fprintf(&rows, `{"id":%d,"s":"%s"}`, first+i, strings.Repeat("x", 90))
		}
		rows.WriteString("]")
		return rows.Bytes()
	}

	const n = 3
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range n {
		wg.Go(func() {
			_, err := c.Append(ctx, "shop.t", large(k*2000))
			errs <- err
		})
	}
	waitFor(t, "a large Append inside the backend", func() bool { return b.inside.Load() > 0 })
	if got := gaugeValue(t, url, "fluss_rpc_inflight_request_bytes"); got < 200<<10 {
		t.Errorf("fluss_rpc_inflight_request_bytes = %v with a large request inside", got)
	}

	// Small requests do not wait for the large ones.
	if _, err := c.Append(ctx, "shop.t", []byte(`[{"id":-1,"s":"small"}]`)); err != nil {
		t.Fatalf("small Append while large ones wait: %v", err)
	}
	// A large request that cannot get in before its deadline is refused.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := c.Append(short, "shop.t", large(100000))
	cancel()
	if code := connect.CodeOf(err); code != connect.CodeDeadlineExceeded {
		t.Fatalf("large Append past its deadline while waiting: %v (code %v), want deadline_exceeded", err, code)
	}

	if m := b.most.Load(); m != 1 {
		t.Fatalf("%d large Appends were inside the backend at once, want 1", m)
	}
	for range n {
		b.release <- struct{}{}
	}
	close(b.release)
	released = true
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("large Append: %v", err)
		}
	}
	if m := b.most.Load(); m != 1 {
		t.Errorf("%d large Appends were inside the backend at once, want 1", m)
	}
	if got := gaugeValue(t, url, "fluss_rpc_inflight_request_bytes"); got != 0 {
		t.Errorf("fluss_rpc_inflight_request_bytes = %v after every request answered", got)
	}
	off, err := c.ListOffsets(ctx, "shop.t", flussv1.ListOffsetsRequest_LATEST, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(off) != 1 || off[0].GetOffset() != n*2000+1 {
		t.Fatalf("offsets after the Appends: %v, want %d rows (the refused request stored nothing)", off, n*2000+1)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// gaugeValue reads one unlabelled metric from /metrics.
func gaugeValue(t *testing.T, url, name string) float64 {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(body)) {
		var v float64
		if _, err := fmt.Sscanf(line, name+" %g", &v); err == nil {
			return v
		}
	}
	t.Fatalf("%s not in /metrics", name)
	return 0
}
