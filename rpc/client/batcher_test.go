package client

import (
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
