package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
)

// oldLogTuning keeps the leader lease long enough that a partitioned leader
// surely stores the appends it is given before it steps down (with
// testTuning's 100 ms lease that is a race against the proposer).
func oldLogTuning() RaftTuning {
	return RaftTuning{
		HeartbeatTimeout:   time.Second,
		ElectionTimeout:    time.Second,
		LeaderLeaseTimeout: time.Second,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// openTuned is testCluster.open with a tuning of the test's choice.
func (c *testCluster) openTuned(i int, bootstrap bool, tuning RaftTuning) {
	cfg := c.config(i, bootstrap)
	cfg.Raft = tuning
	c.openWith(i, cfg)
}

// isolate cuts replica i off from the others in both directions.
func (c *testCluster) isolate(i int) {
	c.trans[i].DisconnectAll()
	for j, tr := range c.trans {
		if j != i {
			tr.Disconnect(c.addrs[i])
		}
	}
}

// rawEntries reads log entries [from, to] of a closed replica's data log
// straight from disk (no raft running on it).
func rawEntries(t *testing.T, dir string, from uint64) (last uint64, entries []*raft.Log) {
	t.Helper()
	l, err := openLog(filepath.Join(dir, "log"), logstore.Options{}, nil, nil)
	if err != nil {
		t.Fatalf("open old log: %v", err)
	}
	defer l.Close()
	last, err = l.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for idx := from; idx <= last; idx++ {
		e := new(raft.Log)
		if err := l.GetLog(idx, e); err != nil {
			t.Fatalf("old log entry %d: %v", idx, err)
		}
		entries = append(entries, e)
	}
	return last, entries
}

// TestOldLeaderLogIsTruncatedOnReturn: a leader that stored entries it could
// not commit (its followers unreachable) and then went down must not make
// the cluster lose or duplicate data when it comes back with that old log.
// The others elect a leader and commit different entries at the same raft
// indexes; the old leader, restarted on its old directory, must truncate its
// uncommitted tail (Raft's log matching) and end with exactly the committed
// log of the others, and the clients of its uncommitted appends must have
// got an error, never an ack.
func TestOldLeaderLogIsTruncatedOnReturn(t *testing.T) {
	c := &testCluster{t: t}
	for i := 0; i < 3; i++ {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("r%d", i)))
		c.dirs = append(c.dirs, t.TempDir())
		c.addrs = append(c.addrs, addr)
		c.trans = append(c.trans, tr)
		c.layout = append(c.layout, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: addr, Suffrage: raft.Voter})
	}
	c.connect()
	c.reps = make([]*Replica, 3)
	for i := range c.reps {
		c.openTuned(i, true, oldLogTuning())
	}
	defer c.closeAll()
	waitFor(t, 20*time.Second, func() error {
		if c.leader() < 0 {
			return errors.New("no leader")
		}
		return nil
	})

	// Committed history everyone agrees on.
	acked := map[ws]int64{}
	for s := int32(0); s < 10; s++ {
		base, err := c.append([][]byte{makeBatch(1+s%3, fmt.Sprintf("committed-1/%d", s))}, 1, s)
		if err != nil {
			t.Fatal(err)
		}
		acked[ws{1, s}] = base
	}
	old := c.leader()
	if old < 0 {
		t.Fatal("no leader after the first appends")
	}
	oldRep := c.reps[old]
	hwBefore := oldRep.HighWatermark()
	commitBefore := oldRep.Raft().CommitIndex()
	lastBefore := oldRep.Raft().LastIndex()

	// Partition the leader, then give it appends it can store but not commit
	// (writers 100.., one request each, so they may share an entry).
	c.isolate(old)
	const lost = 5
	errs := make([]error, lost)
	var wg sync.WaitGroup
	for s := range lost {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, errs[s] = oldRep.Append(ctx, [][]byte{makeBatch(2, fmt.Sprintf("uncommitted-2/%d", s))}, int64(100+s), 0)
		})
	}
	waitFor(t, 10*time.Second, func() error {
		if li := oldRep.Raft().LastIndex(); li <= lastBefore {
			return fmt.Errorf("isolated leader's last index %d, want > %d", li, lastBefore)
		}
		return nil
	})
	// Without a quorum the leader steps down and every waiting client is
	// told the outcome is unknown.
	wg.Wait()
	for s, err := range errs {
		if err == nil {
			t.Fatalf("uncommitted append %d was acknowledged by an isolated leader", s)
		}
		if !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrClosed) {
			t.Errorf("uncommitted append %d: %v, want a retryable not-leader error", s, err)
		}
	}
	if hw := oldRep.HighWatermark(); hw != hwBefore {
		t.Fatalf("isolated leader applied past its committed state: hw %d, was %d", hw, hwBefore)
	}
	uncommittedLast := oldRep.Raft().LastIndex()
	c.closeReplica(old)

	// The others elect among themselves and commit different entries at the
	// indexes the old leader used.
	waitFor(t, 20*time.Second, func() error {
		l := c.leader()
		if l < 0 || l == old {
			return fmt.Errorf("no new leader yet (%d)", l)
		}
		return nil
	})
	for s := int32(0); s < 20; s++ {
		base, err := c.append([][]byte{makeBatch(1+s%2, fmt.Sprintf("committed-3/%d", s))}, 3, s)
		if err != nil {
			t.Fatal(err)
		}
		acked[ws{3, s}] = base
	}
	newLeader := c.leader()
	if newLeader < 0 {
		t.Fatal("no leader after the second appends")
	}
	c.mu.Lock()
	leaderRep := c.reps[newLeader]
	c.mu.Unlock()
	if li := leaderRep.Raft().LastIndex(); li < uncommittedLast {
		t.Fatalf("new leader's log ends at %d, before the old leader's uncommitted tail (%d): nothing to overwrite", li, uncommittedLast)
	}

	// The old leader's directory really holds entries the others do not.
	last, tail := rawEntries(t, c.dirs[old], commitBefore+1)
	if last != uncommittedLast {
		t.Fatalf("old leader's log on disk ends at %d, it had %d", last, uncommittedLast)
	}
	foundUncommitted := false
	for _, e := range tail {
		if bytes.Contains(e.Data, []byte("uncommitted-2/")) {
			foundUncommitted = true
		}
	}
	if !foundUncommitted {
		t.Fatalf("old leader's log (%d..%d) holds none of the uncommitted appends", commitBefore+1, last)
	}

	// Back it comes, on its old log and a reconnected transport.
	_, c.trans[old] = raft.NewInmemTransport(c.addrs[old])
	c.connect()
	c.openTuned(old, false, oldLogTuning())
	c.mu.Lock()
	reps := append([]*Replica(nil), c.reps...)
	c.mu.Unlock()
	hw := leaderRep.HighWatermark()
	waitFor(t, 30*time.Second, func() error {
		for i, r := range reps {
			if got := r.HighWatermark(); got != hw {
				return fmt.Errorf("replica %d hw %d, leader %d", i, got, hw)
			}
		}
		if a, b := reps[old].Raft().LastIndex(), leaderRep.Raft().LastIndex(); a != b {
			return fmt.Errorf("old leader's last index %d, leader's %d", a, b)
		}
		return nil
	})
	want := fetchAll(t, leaderRep)
	sameBatches(t, want, reps)
	stored := index(t, want)
	for k, base := range acked {
		if bases := stored[k]; len(bases) != 1 || bases[0] != base {
			t.Fatalf("acknowledged %+v at %d is stored at %v", k, base, bases)
		}
	}
	for k := range stored {
		if k.w >= 100 {
			t.Fatalf("unacknowledged append %+v of the old leader is in the committed log", k)
		}
	}
	if len(stored) != len(acked) {
		t.Fatalf("%d requests stored, %d acknowledged", len(stored), len(acked))
	}
	// The raft entries themselves, index by index: the old leader's log now
	// matches the leader's, so its uncommitted tail is gone from disk too.
	c.closeReplica(old)
	_, oldTail := rawEntries(t, c.dirs[old], commitBefore+1)
	leaderLast := leaderRep.Raft().LastIndex()
	if got, want := commitBefore+uint64(len(oldTail)), leaderLast; got != want {
		t.Fatalf("old leader's log ends at %d after catching up, leader's at %d", got, want)
	}
	for _, e := range oldTail {
		if bytes.Contains(e.Data, []byte("uncommitted-2/")) {
			t.Fatalf("old leader's log still holds an uncommitted append at index %d (term %d)", e.Index, e.Term)
		}
	}
	t.Logf("old leader %d: uncommitted tail %d..%d replaced; new leader %d, hw %d, %d batches",
		old, lastBefore+1, uncommittedLast, newLeader, hw, len(want))
}
