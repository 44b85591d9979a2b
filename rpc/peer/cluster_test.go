package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// counterFSM counts applied commands and remembers the sum of their uint64 payloads.
type counterFSM struct {
	mu       sync.Mutex
	n, sum   uint64
	restored bool
}

func (f *counterFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(l.Data) >= 8 { // the count is in the first 8 bytes
		f.n++
		f.sum += binary.BigEndian.Uint64(l.Data)
	}
	return f.n
}

func (f *counterFSM) state() (n, sum uint64, restored bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.sum, f.restored
}

func (f *counterFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], f.n)
	binary.BigEndian.PutUint64(b[8:], f.sum)
	return snap(b[:]), nil
}

func (f *counterFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n, f.sum, f.restored = binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), true
	return nil
}

type snap []byte

func (s snap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}
func (s snap) Release() {}

// replica is one Raft group member on one node; its stores survive restarts.
type replica struct {
	id    raft.ServerID
	logs  *raft.InmemStore
	snaps *raft.InmemSnapshotStore
	fsm   *counterFSM
	tr    raft.Transport
	r     *raft.Raft
	tune  func(*raft.Config) // if set, adjusts testConfig on every start
}

func testConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 150 * time.Millisecond
	c.ElectionTimeout = 150 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.TrailingLogs = 16
	c.SnapshotThreshold = 1 << 30
	c.SnapshotInterval = time.Hour
	c.Logger = hclog.NewNullLogger()
	return c
}

// start (re)starts the replica's raft on transport tr with its existing stores and a fresh FSM.
func (rp *replica) start(t testing.TB, tr raft.Transport) {
	t.Helper()
	rp.fsm = &counterFSM{}
	rp.tr = tr
	c := testConfig(rp.id)
	if rp.tune != nil {
		rp.tune(c)
	}
	r, err := raft.NewRaft(c, rp.fsm, rp.logs, rp.logs, rp.snaps, tr)
	if err != nil {
		t.Fatalf("NewRaft %s: %v", rp.id, err)
	}
	rp.r = r
}

func (rp *replica) stop(t testing.TB) {
	t.Helper()
	if rp.r == nil {
		return
	}
	if err := rp.r.Shutdown().Error(); err != nil {
		t.Errorf("shutdown %s: %v", rp.id, err)
	}
	rp.r = nil
}

// waitFor polls f until it returns nil or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaderOf waits for a leader among reps and returns its index.
func leaderOf(t testing.TB, reps []*replica) int {
	t.Helper()
	idx := -1
	waitFor(t, 10*time.Second, func() error {
		for i, rp := range reps {
			if rp.r != nil && rp.r.State() == raft.Leader {
				idx = i
				return nil
			}
		}
		return errors.New("no leader")
	})
	return idx
}

// applyN applies n commands on r, pipelined, and waits for all of them.
func applyN(t testing.TB, r *raft.Raft, n int) {
	t.Helper()
	fs := make([]raft.ApplyFuture, 0, n)
	for i := range n {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i+1))
		fs = append(fs, r.Apply(b[:], 10*time.Second))
	}
	for i, f := range fs {
		if err := f.Error(); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
}

// applyNRetry applies n commands to whichever replica leads, retrying a
// command whose leader lost leadership (as a client would). A retried
// command may have been committed already, so the group ends with >= n.
func applyNRetry(t testing.TB, reps []*replica, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i+1))
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := reps[leaderOf(t, reps)].r.Apply(b[:], 10*time.Second).Error()
			if err == nil {
				break
			}
			if !errors.Is(err, raft.ErrLeadershipLost) && !errors.Is(err, raft.ErrNotLeader) || time.Now().After(deadline) {
				t.Fatalf("apply %d: %v", i, err)
			}
		}
	}
}

// bootstrap creates one group with a replica per transport and bootstraps it from the first.
func bootstrap(t testing.TB, trs []raft.Transport) []*replica { return bootstrapTuned(t, trs, nil) }

// bootstrapTuned is bootstrap with tune applied to every replica's raft config.
func bootstrapTuned(t testing.TB, trs []raft.Transport, tune func(*raft.Config)) []*replica {
	t.Helper()
	reps := make([]*replica, len(trs))
	var cfg raft.Configuration
	for i, tr := range trs {
		reps[i] = &replica{id: raft.ServerID(fmt.Sprintf("n%d", i)), logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore(), tune: tune}
		cfg.Servers = append(cfg.Servers, raft.Server{ID: reps[i].id, Address: tr.LocalAddr(), Suffrage: raft.Voter})
	}
	for i, tr := range trs {
		reps[i].start(t, tr)
	}
	if err := reps[0].r.BootstrapCluster(cfg).Error(); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	return reps
}

func sameState(leader, follower *counterFSM) error {
	ln, ls, _ := leader.state()
	fn, fs, _ := follower.state()
	if ln != fn || ls != fs {
		return fmt.Errorf("follower at n=%d sum=%d, leader at n=%d sum=%d", fn, fs, ln, ls)
	}
	return nil
}
