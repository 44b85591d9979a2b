package replica

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/rpc/peer"
)

// setProgress is a transport whose follower progress the test sets
// (rpc/peer records it from real answers; progress_test.go there).
type setProgress struct {
	raft.Transport
	mu    sync.Mutex
	last  func() uint64
	peers map[raft.ServerAddress]peer.Progress
}

func (s *setProgress) TrackProgress(lastIndex func() uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = lastIndex
}

func (s *setProgress) Progress(target raft.ServerAddress) (peer.Progress, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.peers[target]
	return p, ok
}

func (s *setProgress) set(target raft.ServerAddress, p peer.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peers[target] = p
}

// TestInSync: the leader counts itself and every follower that caught up
// within maxLag, counting those it has not heard from as in sync only
// while it has led for less than maxLag; a follower answers nothing.
func TestInSync(t *testing.T) {
	// Timeouts of a second, not the tests' 100 ms: the checks below need
	// one leader throughout, and on a loaded host (CI runs the packages
	// side by side) 100 ms lost it once.
	c := &testCluster{t: t, tweak: func(cfg *Config) {
		cfg.Raft.HeartbeatTimeout = time.Second
		cfg.Raft.ElectionTimeout = time.Second
		cfg.Raft.LeaderLeaseTimeout = time.Second
	}}
	var trackers []*setProgress
	c.wrap = func(tr raft.Transport) raft.Transport {
		s := &setProgress{Transport: tr, peers: map[raft.ServerAddress]peer.Progress{}}
		trackers = append(trackers, s)
		return s
	}
	c.init(3)
	defer c.closeAll()
	li := -1
	waitFor(t, 10*time.Second, func() error {
		if li = c.leader(); li < 0 {
			return errors.New("no leader")
		}
		if _, ok := c.reps[li].InSync(time.Hour); !ok {
			return errors.New("leader not answering InSync yet")
		}
		return nil
	})
	leader, tr := c.reps[li], trackers[li]
	tr.mu.Lock()
	last := tr.last
	tr.mu.Unlock()
	if last == nil || last() == 0 {
		t.Fatal("the replica gave its transport no last index, or it says 0 after the bootstrap entry")
	}
	var followers []int
	for i := range c.reps {
		if i != li {
			followers = append(followers, i)
			if ids, ok := c.reps[i].InSync(time.Hour); ok {
				t.Fatalf("follower %d answered InSync: %v", i, ids)
			}
		}
	}
	ids := func(maxLag time.Duration) []raft.ServerID {
		t.Helper()
		got, ok := leader.InSync(maxLag)
		if !ok {
			t.Fatal("leader does not answer InSync")
		}
		slices.Sort(got)
		return got
	}
	want := func(is ...int) []raft.ServerID {
		var out []raft.ServerID
		for _, i := range is {
			out = append(out, c.layout[i].ID)
		}
		slices.Sort(out)
		return out
	}

	// Newly elected: nothing heard yet, every follower counts.
	if got := ids(time.Hour); !slices.Equal(got, want(0, 1, 2)) {
		t.Fatalf("InSync(1h) of a new leader = %v", got)
	}
	// Led for longer than maxLag without hearing from them: out.
	time.Sleep(30 * time.Millisecond)
	if got := ids(20 * time.Millisecond); !slices.Equal(got, want(li)) {
		t.Fatalf("InSync(20ms) with no progress = %v, want only the leader", got)
	}
	// One follower caught up just now, the other long ago.
	a, b := followers[0], followers[1]
	tr.set(c.addrs[a], peer.Progress{CaughtUp: time.Now(), Contact: time.Now()})
	tr.set(c.addrs[b], peer.Progress{CaughtUp: time.Now().Add(-time.Second), Contact: time.Now()})
	if got := ids(20 * time.Millisecond); !slices.Equal(got, want(li, a)) {
		t.Fatalf("InSync(20ms) = %v, want the leader and follower %d", got, a)
	}
	if got := ids(time.Minute); !slices.Equal(got, want(0, 1, 2)) {
		t.Fatalf("InSync(1m) = %v, want all", got)
	}
}
