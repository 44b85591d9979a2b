package rpc

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRequestGate(t *testing.T) {
	const limit = 4 * gateMinBytes
	g := newRequestGate(limit)
	ctx := context.Background()

	// Small requests are not counted and never wait, even with the gate full.
	full, err := g.enter(ctx, 10*limit)
	if err != nil {
		t.Fatal(err)
	}
	if g.Held() != limit {
		t.Fatalf("a request over the limit holds %d, want the whole budget %d", g.Held(), limit)
	}
	small, err := g.enter(ctx, gateMinBytes-1)
	if err != nil || g.Held() != limit {
		t.Fatalf("small request: err %v, held %d", err, g.Held())
	}
	small()

	// A large request waits until the one inside leaves.
	entered := make(chan func(), 1)
	go func() {
		leave, err := g.enter(ctx, 2*gateMinBytes)
		if err != nil {
			t.Error(err)
			close(entered)
			return
		}
		entered <- leave
	}()
	select {
	case <-entered:
		t.Fatal("a large request entered while the budget was taken")
	case <-time.After(50 * time.Millisecond):
	}
	full()
	leave := <-entered
	if leave == nil {
		t.FailNow()
	}
	if g.Held() != 2*gateMinBytes {
		t.Fatalf("held %d, want %d", g.Held(), 2*gateMinBytes)
	}

	// Two fit side by side; a third waits, and gives up with its context.
	second, err := g.enter(ctx, 2*gateMinBytes)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.enter(wctx, gateMinBytes); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past the deadline: err %v, want DeadlineExceeded", err)
	}
	leave()
	second()
	if g.Held() != 0 {
		t.Fatalf("held %d after every request left", g.Held())
	}
	// The budget is whole again: a request of all of it enters at once.
	all, err := g.enter(ctx, limit)
	if err != nil {
		t.Fatal(err)
	}
	all()

	var none *requestGate
	if leave, err := none.enter(ctx, 1<<30); err != nil {
		t.Fatal(err)
	} else {
		leave()
	}
}
