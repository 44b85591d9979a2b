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

// waitBatcher polls cond, called with b.mu held, until it holds; after
// 10 s it fails the test with what cond last said.
func waitBatcher[In, Out any](t *testing.T, b *batcher[In, Out], cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		ok, state := cond()
		b.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(state)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n calls wait in b's queue.
func waitQueued[In, Out any](t *testing.T, b *batcher[In, Out], n int) {
	t.Helper()
	waitBatcher(t, b, func() (bool, string) {
		return len(b.queue) == n, fmt.Sprintf("%d calls queued, want %d", len(b.queue), n)
	})
}

// waitSlotsBack waits until b holds no request slot and queues nothing:
// a request's goroutine answers its callers before it gives its slot back
// (and may linger first), so slots come back soon after the callers
// return, not necessarily before. A leaked slot never does.
func waitSlotsBack[In, Out any](t *testing.T, b *batcher[In, Out]) {
	t.Helper()
	waitBatcher(t, b, func() (bool, string) {
		return b.inflight == 0 && len(b.queue) == 0, fmt.Sprintf("%d slots held, %d calls queued", b.inflight, len(b.queue))
	})
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
// again, the slot waits for them no longer than the linger: a later call
// then goes out alone, and the slot is given back.
func TestBatcherLingerIsBounded(t *testing.T) {
	b, sizes, holding, release := recordingBatcher(time.Second)
	callAll(t, b, holding, release, 4, func(i int) {
		if _, err := b.do(testCtx(t), i); err != nil {
			t.Error(err)
		}
	})
	// A request of one call, then one of three: the slot now waits for
	// three more calls.
	waitBatcher(t, b, func() (bool, string) {
		return len(b.waiters) == 1, fmt.Sprintf("%d slots lingering, want 1", len(b.waiters))
	})
	// One call comes, nobody else: it goes out when the linger ends.
	if out, err := b.do(testCtx(t), 99); err != nil || out != 99 {
		t.Fatalf("late call: %d, %v", out, err)
	}
	if got := sizes(); !slices.Equal(got, []int{1, 3, 1}) {
		t.Errorf("request sizes %v, want [1 3 1]", got)
	}
	waitSlotsBack(t, b)
}
