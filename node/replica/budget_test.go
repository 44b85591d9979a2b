package replica

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWriteBudget(t *testing.T) {
	b := NewWriteBudget(100)
	if err := b.take(150); err != nil || b.Used() != 150 {
		t.Fatalf("a write alone is taken whatever its size: %v, used %d", err, b.Used())
	}
	if err := b.take(1); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "limits.max_pending_write_bytes (100)") {
		t.Fatalf("over the limit: %v, want ErrBusy naming the setting", err)
	}
	b.give(150)
	if err := b.take(60); err != nil {
		t.Fatal(err)
	}
	if err := b.take(40); err != nil || b.Used() != 100 {
		t.Fatalf("up to the limit: %v, used %d", err, b.Used())
	}
	if err := b.take(1); !errors.Is(err, ErrBusy) {
		t.Fatalf("at the limit: %v", err)
	}
	b.give(100)
	var none *WriteBudget
	if err := none.take(1 << 40); err != nil || none.Used() != 0 {
		t.Fatalf("a nil budget bounds nothing: %v", err)
	}
}

// Replicas that share a budget refuse writes once the writes they hold
// fill it, whichever bucket holds them; a caller that stops waiting gives
// its share back although its write stays queued; answered writes give
// theirs back.
func TestReplicasShareTheWriteBudget(t *testing.T) {
	batch := func() []byte { return makeBatch(4, strings.Repeat("x", 200)) }
	size := int64(len(batch()))
	budget := NewWriteBudget(2*size + 10) // two writes at a time
	share := func(c *Config) { c.Writes = budget }
	r1, r2 := openSingle(t, t.TempDir(), share), openSingle(t, t.TempDir(), share)
	defer r1.Close()
	defer r2.Close()
	ctx := context.Background()

	release := make(chan struct{})
	r1.hookBeforeDrain = func() { <-release }
	held := make(chan error, 1)
	go func() {
		_, _, err := r1.Append(ctx, [][]byte{batch()}, 0, 0)
		held <- err
	}()
	gaveUp, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() {
		_, _, err := r1.Append(gaveUp, [][]byte{batch()}, 0, 0)
		abandoned <- err
	}()
	waitFor(t, 5*time.Second, func() error {
		if n := r1.queued(); n < 2 {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	if got := budget.Used(); got != 2*size {
		t.Fatalf("two queued writes hold %d bytes, want %d", got, 2*size)
	}
	if _, _, err := r2.Append(ctx, [][]byte{batch()}, 0, 0); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "max_pending_write_bytes") {
		t.Fatalf("another bucket's write while the budget is full: %v, want ErrBusy", err)
	}

	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned write: %v", err)
	}
	if got := budget.Used(); got != size {
		t.Fatalf("%d bytes held after a caller gave up, want %d", got, size)
	}
	if _, _, err := r2.Append(ctx, [][]byte{batch()}, 0, 0); err != nil {
		t.Fatalf("another bucket's write once a share was given back: %v", err)
	}

	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the held write: %v", err)
	}
	if got := budget.Used(); got != 0 {
		t.Fatalf("%d bytes held after every write was answered", got)
	}
}
