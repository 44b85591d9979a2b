package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/raftmeta"
)

// testCluster is n replicas of one bucket on connected in-memory transports.
type testCluster struct {
	t      testing.TB
	dirs   []string
	addrs  []raft.ServerAddress
	trans  []*raft.InmemTransport
	mu     sync.Mutex
	reps   []*Replica // nil while closed
	layout []raft.Server
	wrap   func(raft.Transport) raft.Transport // optional, around each replica's transport
	tweak  func(*Config)                       // optional, applied to every replica's Config

	retries atomic.Int64 // client retries after a retryable error
}

func newTestCluster(t *testing.T, n int) *testCluster {
	return newTestClusterWith(t, n, nil)
}

// newTestClusterWith is newTestCluster with tweak applied to every
// replica's Config.
func newTestClusterWith(t *testing.T, n int, tweak func(*Config)) *testCluster {
	c := &testCluster{t: t, tweak: tweak}
	c.init(n)
	return c
}

// init creates n replicas' transports and opens them (c.tweak and c.wrap
// set before apply).
func (c *testCluster) init(n int) {
	t := c.t
	for i := 0; i < n; i++ {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("r%d", i)))
		c.dirs = append(c.dirs, t.TempDir())
		c.addrs = append(c.addrs, addr)
		c.trans = append(c.trans, tr)
		c.layout = append(c.layout, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: addr, Suffrage: raft.Voter})
	}
	c.connect()
	c.reps = make([]*Replica, n)
	for i := range c.reps {
		c.open(i, true)
	}
}

func (c *testCluster) connect() {
	for _, a := range c.trans {
		for j, b := range c.trans {
			a.Connect(c.addrs[j], b) // itself too: a replica on a pump campaigns by a TimeoutNow to itself
		}
	}
}

func (c *testCluster) open(i int, bootstrap bool) { c.openWith(i, c.config(i, bootstrap)) }

// config is replica i's Config; with bootstrap it starts the whole layout.
func (c *testCluster) config(i int, bootstrap bool) Config {
	cfg := Config{
		ID:        raftmeta.BucketID{TableID: 9, Bucket: 1},
		Dir:       c.dirs[i],
		LocalID:   c.layout[i].ID,
		LocalAddr: c.addrs[i],
		Transport: c.transport(i),
		Raft:      clusterTuning(),
		Logger:    testLogger(c.t),
	}
	if bootstrap {
		cfg.Bootstrap = bootWith(c.layout...)
	}
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	return cfg
}

func (c *testCluster) transport(i int) raft.Transport {
	if c.wrap != nil {
		return c.wrap(c.trans[i])
	}
	return c.trans[i]
}

// openWith opens replica i with cfg.
func (c *testCluster) openWith(i int, cfg Config) {
	r, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("open replica %d: %v", i, err)
	}
	c.mu.Lock()
	c.reps[i] = r
	c.mu.Unlock()
}

// restart reopens replica i (closed before) on a fresh transport.
func (c *testCluster) restart(i int) {
	_, c.trans[i] = raft.NewInmemTransport(c.addrs[i])
	c.connect()
	c.open(i, false)
}

func (c *testCluster) closeReplica(i int) {
	c.mu.Lock()
	r := c.reps[i]
	c.reps[i] = nil
	c.mu.Unlock()
	if err := r.Close(); err != nil {
		c.t.Errorf("close replica %d: %v", i, err)
	}
}

func (c *testCluster) closeAll() {
	for i := range c.reps {
		if c.reps[i] != nil {
			c.closeReplica(i)
		}
	}
}

// leader returns the index of a ready leader, or -1.
func (c *testCluster) leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, r := range c.reps {
		if r != nil && r.IsLeader() {
			return i
		}
	}
	return -1
}

// append behaves like a client: it sends to whoever leads and retries the
// same (writer, seq) on retryable errors until it is acknowledged.
func (c *testCluster) append(batches [][]byte, w int64, s int32) (int64, error) {
	var base int64
	err := c.onLeader(func(ctx context.Context, r *Replica) (err error) {
		base, _, err = r.Append(ctx, batches, w, s)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("writer %d seq %d: %w", w, s, err)
	}
	return base, nil
}

// onLeader runs call on the current leader like a client would, again on
// retryable errors (no leader, not leader, closed, busy, timeout) until it
// succeeds or 30 s pass.
func (c *testCluster) onLeader(call func(ctx context.Context, r *Replica) error) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		i := c.leader()
		if i < 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		c.mu.Lock()
		r := c.reps[i]
		c.mu.Unlock()
		if r == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := call(ctx, r)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader), errors.Is(err, ErrClosed),
			errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded):
			c.retries.Add(1)
			time.Sleep(2 * time.Millisecond)
		default:
			return err
		}
	}
	return errors.New("not acknowledged in 30s")
}

func TestClusterFailoverKeepsEveryAckExactlyOnce(t *testing.T) {
	c := newTestCluster(t, 3)
	defer c.closeAll()
	waitFor(t, 10*time.Second, func() error {
		if c.leader() < 0 {
			return errors.New("no leader")
		}
		return nil
	})

	const writers, perWriter = 6, 40
	var mu sync.Mutex
	acked := map[ws]int64{}
	progress := make(chan struct{}, writers*perWriter)
	var wg sync.WaitGroup
	for w := 1; w <= writers; w++ {
		wg.Go(func() {
			for s := int32(0); s < perWriter; s++ {
				base, err := c.append([][]byte{makeBatch(1+s%3, fmt.Sprintf("w%d/s%d", w, s))}, int64(w), s)
				if err != nil {
					t.Errorf("%v", err)
					return
				}
				mu.Lock()
				acked[ws{int64(w), s}] = base
				mu.Unlock()
				progress <- struct{}{}
			}
		})
	}
	// Let a third of the writes through, then kill the leader mid-stream.
	for i := 0; i < writers*perWriter/3; i++ {
		<-progress
	}
	old := c.leader()
	if old < 0 {
		t.Fatal("no leader mid-stream")
	}
	c.closeReplica(old)
	wg.Wait()
	if t.Failed() {
		return
	}
	newLeader := c.leader()
	if newLeader < 0 || newLeader == old {
		t.Fatalf("leader after failover: %d (old %d)", newLeader, old)
	}

	// Bring the old leader back as a follower: it must converge too.
	c.restart(old)
	c.mu.Lock()
	reps := append([]*Replica(nil), c.reps...)
	c.mu.Unlock()
	hw := reps[newLeader].HighWatermark()
	waitFor(t, 20*time.Second, func() error {
		for i, r := range reps {
			if got := r.HighWatermark(); got != hw {
				return fmt.Errorf("replica %d hw %d, leader %d", i, got, hw)
			}
		}
		return nil
	})
	want := fetchAll(t, reps[newLeader])
	sameBatches(t, want, reps)
	stored := index(t, want)
	for k, base := range acked {
		if bases := stored[k]; len(bases) != 1 || bases[0] != base {
			t.Fatalf("acknowledged %+v at %d is stored at %v", k, base, bases)
		}
	}
	if len(stored) != writers*perWriter {
		t.Fatalf("%d requests stored, %d acknowledged", len(stored), writers*perWriter)
	}
	// A follower refuses writes and names the leader.
	follower := (newLeader + 1) % 3
	_, _, err := reps[follower].Append(context.Background(), [][]byte{makeBatch(1, "f")}, 0, 0)
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != c.layout[newLeader].ID {
		t.Fatalf("append on follower: %s, want NotLeaderError naming %s", errString(err), c.layout[newLeader].ID)
	}
	t.Logf("old leader %d, new leader %d, %d batches, hw %d, %d client retries", old, newLeader, len(want), hw, c.retries.Load())
}

func TestClusterLeadershipTransferDuringWrites(t *testing.T) {
	c := newTestCluster(t, 3)
	defer c.closeAll()
	waitFor(t, 10*time.Second, func() error {
		if c.leader() < 0 {
			return errors.New("no leader")
		}
		return nil
	})
	const writers, perWriter = 4, 50
	var mu sync.Mutex
	acked := map[ws]int64{}
	progress := make(chan struct{}, writers*perWriter)
	var wg sync.WaitGroup
	for w := 1; w <= writers; w++ {
		wg.Go(func() {
			for s := int32(0); s < perWriter; s++ {
				base, err := c.append([][]byte{makeBatch(1, fmt.Sprintf("w%d/s%d", w, s))}, int64(w), s)
				if err != nil {
					t.Errorf("%v", err)
					return
				}
				mu.Lock()
				acked[ws{int64(w), s}] = base
				mu.Unlock()
				progress <- struct{}{}
			}
		})
	}
	for i := 0; i < writers*perWriter/4; i++ {
		<-progress
	}
	old := c.leader()
	if err := c.reps[old].Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	l := c.leader()
	if l == old {
		t.Logf("leadership came back to %d", old)
	}
	stored := index(t, fetchAll(t, c.reps[l]))
	if len(stored) != writers*perWriter {
		t.Fatalf("%d requests stored, %d acknowledged", len(stored), writers*perWriter)
	}
	for k, base := range acked {
		if bases := stored[k]; len(bases) != 1 || bases[0] != base {
			t.Fatalf("acknowledged %+v at %d is stored at %v", k, base, bases)
		}
	}
	t.Logf("transfer %d -> %d, %d client retries", old, l, c.retries.Load())
}
