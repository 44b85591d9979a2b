package client

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// holdFirstCall makes node hold the first call of procedure on the server:
// holding is closed when it arrives, and it goes on once release is closed.
// Other calls wait meanwhile (the node's lock is held).
func holdFirstCall(node *fakeNode, procedure string) (holding, release chan struct{}) {
	holding, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	node.mu.Lock()
	defer node.mu.Unlock()
	node.hook = func(p string) {
		if p == procedure {
			once.Do(func() { close(holding); <-release })
		}
	}
	return holding, release
}

// waitQueued waits until n calls wait in b's queue.
func waitQueued[In, Out any](t *testing.T, b *batcher[In, Out], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		q := len(b.queue)
		b.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// recordingBatcher returns a batcher of ints, one slot, the given linger,
// whose requests answer each input with itself and record their sizes.
// The first request waits: holding is closed when it is sent, and it is
// answered once release is closed.
func recordingBatcher(linger time.Duration) (b *batcher[int, int], sizes func() []int, holding, release chan struct{}) {
	var mu sync.Mutex
	var got []int
	holding, release = make(chan struct{}), make(chan struct{})
	b = newBatcher(64, 1, linger, func(_ context.Context, in []int) ([]int, error) {
		mu.Lock()
		got = append(got, len(in))
		first := len(got) == 1
		mu.Unlock()
		if first {
			close(holding)
			<-release
		}
		return in, nil
	})
	return b, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}, holding, release
}

// callAll starts one goroutine per caller running call(caller): caller 0
// first, the others once its first request is out and held; it releases
// that request when they are all queued behind it, and waits for all.
func callAll(t *testing.T, b *batcher[int, int], holding, release chan struct{}, callers int, call func(caller int)) {
	var wg sync.WaitGroup
	wg.Go(func() { call(0) })
	<-holding
	for g := 1; g < callers; g++ {
		wg.Go(func() { call(g) })
	}
	waitQueued(t, b, callers-1)
	close(release)
	wg.Wait()
}

// wakeLingering ends the waits of b's slots in regather, as enough calls
// would.
func wakeLingering[In, Out any](b *batcher[In, Out]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.waiters {
		close(w.wake)
	}
	b.waiters = nil
}

// TestBatcherRegathersLoopingCallers: callers that call again as soon as
// they are answered all meet in the next request, because the slot waits
// for as many calls as it answered, also after a lone call while others
// are queued, even when callers take a while to call again (the linger
// here is long enough that only the count ends a wait, but for the last:
// the first caller is a call ahead, has no call left to make, and the
// others wait for the linger to end).
func TestBatcherRegathersLoopingCallers(t *testing.T) {
	for _, callers := range []int{2, 8} {
		t.Run(fmt.Sprint(callers, " callers"), func(t *testing.T) {
			const rounds = 30
			b, sizes, holding, release := recordingBatcher(time.Second)
			defer wakeLingering(b)
			callAll(t, b, holding, release, callers, func(g int) {
				for i := range rounds {
					if out, err := b.do(testCtx(t), g*1000+i); err != nil || out != g*1000+i {
						t.Errorf("caller %d call %d: %d, %v", g, i, out, err)
						return
					}
					time.Sleep(time.Millisecond) // work between calls: the others are queued first
				}
			})
			got := sizes()
			total := 0
			for _, n := range got {
				total += n
			}
			if total != callers*rounds {
				t.Fatalf("requests carried %d calls, want %d (sizes %v)", total, callers*rounds, got)
			}
			// The first call goes alone, the others queue behind it; the
			// slot answers it and waits for it to call again, so from the
			// second request on every request carries every caller, but
			// for the last.
			if len(got) < 3 {
				t.Fatalf("request sizes %v: want at least 3 requests", got)
			}
			for i, n := range got[1 : len(got)-1] {
				if n != callers {
					t.Fatalf("request %d carried %d calls, want all %d callers (sizes %v)", i+1, n, callers, got)
				}
			}
		})
	}
}

// TestBatcherLingerIsBounded: when the callers of a batch do not call
// again, a later call waits for the linger at most, then goes out alone,
// and the slot is given back.
func TestBatcherLingerIsBounded(t *testing.T) {
	const linger = 50 * time.Millisecond
	b, sizes, holding, release := recordingBatcher(linger)
	callAll(t, b, holding, release, 4, func(i int) {
		if _, err := b.do(testCtx(t), i); err != nil {
			t.Error(err)
		}
	})
	// A request of one call, then one of three: the slot now waits for
	// three calls.
	start := time.Now()
	if out, err := b.do(testCtx(t), 99); err != nil || out != 99 {
		t.Fatalf("late call: %d, %v", out, err)
	}
	// Nobody else calls, so the late call went out when the linger ended
	// (measured from the end of the batch, a little before start).
	if waited := time.Since(start); waited < linger/2 {
		t.Errorf("late call answered after %v; want it to wait for the linger (%v)", waited, linger)
	}
	if got := sizes(); !slices.Equal(got, []int{1, 3, 1}) {
		t.Errorf("request sizes %v, want [1 3 1]", got)
	}
	waitSlotsBack(t, b)
}

// waitSlotsBack waits until b holds no request slot and queues nothing.
func waitSlotsBack[In, Out any](t *testing.T, b *batcher[In, Out]) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		inflight, queued := b.inflight, len(b.queue)
		b.mu.Unlock()
		if inflight == 0 && queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s later: %d slots held, %d queued", inflight, queued)
		}
		time.Sleep(time.Millisecond)
	}
}
