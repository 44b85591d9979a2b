package replica

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// pumpTuning is testTuning with a heartbeat timeout long enough for a
// loaded test machine and raft's idle AppendEntries made rare (CommitTimeout
// 1 h). On a pump raft runs BackstopScale times these timeouts: 2–4 s before
// a follower stands for election by itself, which the tests below must beat.
func pumpTuning() RaftTuning {
	t := testTuning()
	t.HeartbeatTimeout, t.ElectionTimeout, t.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	t.CommitTimeout = time.Hour
	return t
}

// backstop is the shortest time after which raft itself would elect a
// leader on a pump.
func backstop() time.Duration { return BackstopScale * pumpTuning().HeartbeatTimeout }

// fakeLiveness is a Liveness the test sets: every address is alive unless
// marked dead. Other nodes see what it sees, unless views gives the view of
// the node at an address.
type fakeLiveness struct {
	mu    sync.Mutex
	dead  map[raft.ServerAddress]bool
	views map[raft.ServerAddress]*fakeLiveness
}

func (f *fakeLiveness) Alive(addr raft.ServerAddress) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.dead[addr]
}

func (f *fakeLiveness) LostBy(by, addr raft.ServerAddress) bool {
	if v := f.views[by]; v != nil {
		return !v.Alive(addr)
	}
	return !f.Alive(addr)
}

func (f *fakeLiveness) kill(addr raft.ServerAddress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead == nil {
		f.dead = map[raft.ServerAddress]bool{}
	}
	f.dead[addr] = true
}

// pumpedCluster starts n replicas of one group on one pump with live as
// its liveness (nil: none).
func pumpedCluster(t *testing.T, n int, live Liveness) (*testCluster, *HeartbeatPump) {
	pump := NewHeartbeatPump(PumpConfig{HeartbeatTimeout: pumpTuning().HeartbeatTimeout, Liveness: live})
	c := newTestClusterWith(t, n, func(cfg *Config) {
		cfg.Pump = pump
		cfg.Raft = pumpTuning()
	})
	return c, pump
}

// waitLeader waits for a ready leader other than not (-1: any) and returns
// how long it took.
func (c *testCluster) waitLeader(t *testing.T, not int) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	var i int
	waitFor(t, 20*time.Second, func() error {
		if i = c.leader(); i < 0 || i == not {
			return errors.New("no new leader")
		}
		return nil
	})
	return i, time.Since(start)
}

// waitFollowed waits until every follower has heard from the leader (they
// know whom to watch) and returns the leader.
func (c *testCluster) waitFollowed(t *testing.T) int {
	t.Helper()
	var leader int
	waitFor(t, 10*time.Second, func() error {
		if leader = c.leader(); leader < 0 {
			return errors.New("no leader")
		}
		for i, r := range c.reps {
			if addr, _ := r.Raft().LeaderWithID(); i != leader && addr != c.addrs[leader] {
				return fmt.Errorf("replica %d follows %q", i, addr)
			}
		}
		return nil
	})
	return leader
}

// TestPumpRaisesRaftTimeouts: replicas on a pump run raft's timeouts
// BackstopScale times longer than configured, leader and followers alike.
func TestPumpRaisesRaftTimeouts(t *testing.T) {
	c, pump := pumpedCluster(t, 3, &fakeLiveness{})
	defer pump.Close()
	defer c.closeAll()
	c.waitLeader(t, -1)
	base := pumpTuning()
	for i, r := range c.reps {
		rc := r.Raft().ReloadableConfig()
		if rc.HeartbeatTimeout != BackstopScale*base.HeartbeatTimeout || rc.ElectionTimeout != BackstopScale*base.ElectionTimeout {
			t.Errorf("replica %d: raft timeouts %v/%v, want %d x %v/%v", i, rc.HeartbeatTimeout, rc.ElectionTimeout, BackstopScale, base.HeartbeatTimeout, base.ElectionTimeout)
		}
	}
}

// TestPumpElectsNewGroupsAtOnce: a group that never had a leader does not
// wait for raft's raised election timer: its first voter stands at once.
func TestPumpElectsNewGroupsAtOnce(t *testing.T) {
	c, pump := pumpedCluster(t, 3, &fakeLiveness{})
	defer pump.Close()
	defer c.closeAll()
	if _, took := c.waitLeader(t, -1); took >= backstop() {
		t.Fatalf("first leader after %v: raft's own timer (%v or later), not the pump, elected it", took, backstop())
	}
}

// TestPumpElectsPreferredLeaderFirst: a new group elects the voter its
// configuration prefers (placement's first replica), whichever it is, so no
// leadership transfer has to follow, and it wins the first election (term
// 2: bootstrapping writes term 1).
func TestPumpElectsPreferredLeaderFirst(t *testing.T) {
	for want := range 3 {
		t.Run(fmt.Sprintf("replica %d preferred", want), func(t *testing.T) {
			pump := NewHeartbeatPump(PumpConfig{HeartbeatTimeout: pumpTuning().HeartbeatTimeout, Liveness: &fakeLiveness{}})
			defer pump.Close()
			preferred := raft.ServerID(fmt.Sprintf("n%d", want))
			c := newTestClusterWith(t, 3, func(cfg *Config) {
				cfg.Pump = pump
				cfg.Raft = pumpTuning()
				cfg.PreferredLeader = func() raft.ServerID { return preferred }
			})
			defer c.closeAll()
			got, _ := c.waitLeader(t, -1)
			if got != want {
				t.Fatalf("replica %d leads the new group, want the preferred replica %d", got, want)
			}
			if term := c.reps[got].raft.CurrentTerm(); term != 2 {
				t.Fatalf("leader in term %d, want 2 (one election after the bootstrap's term 1)", term)
			}
		})
	}
}

// rankingCluster is a 3-replica group with a leader, its liveness view,
// and a pump (not running) to compute ranks with.
func rankingCluster(t *testing.T) (*testCluster, *fakeLiveness, *HeartbeatPump) {
	t.Helper()
	live := &fakeLiveness{}
	c, pump := pumpedCluster(t, 3, live)
	t.Cleanup(c.closeAll)
	t.Cleanup(pump.Close) // runs first
	c.waitLeader(t, -1)
	return c, live, &HeartbeatPump{cfg: PumpConfig{HeartbeatTimeout: time.Second, Liveness: live}}
}

// TestPumpRanksPreferredLeaderFirst: the preferred voter ranks first while
// it is alive and not the leader being replaced; otherwise the per-group
// order decides, alike on every replica.
func TestPumpRanksPreferredLeaderFirst(t *testing.T) {
	c, live, p := rankingCluster(t)
	// Copies of the replicas with another preferred leader (the running
	// ones are read by the pump).
	with := func(i int, pref raft.ServerID) *Replica {
		r := &Replica{cfg: c.reps[i].cfg, raft: c.reps[i].raft}
		r.cfg.PreferredLeader = func() raft.ServerID { return pref }
		return r
	}
	for pref := range 3 {
		id := c.layout[pref].ID
		ranks := map[int]int{}
		for i := range 3 {
			ranks[p.rank(with(i, id), "nobody")] = i
		}
		if ranks[0] != pref || len(ranks) != 3 {
			t.Errorf("no leader, %s preferred: ranks %v (rank: replica), want %d first and three distinct ranks", id, ranks, pref)
		}
		// The preferred voter is the dead leader: the other two rank 0
		// and 1, as without a preference.
		dead := c.addrs[pref]
		seen := map[int]bool{}
		for i := range 3 {
			if i == pref {
				continue
			}
			plain := p.rank(c.reps[i], dead)
			if got := p.rank(with(i, id), dead); got != plain || seen[got] {
				t.Errorf("leader %s dead and preferred: replica %d ranks %d, want %d as without a preference", id, i, got, plain)
			}
			seen[plain] = true
		}
	}
	// A preferred voter whose node is dead does not rank: the others do.
	live.kill(c.addrs[2])
	seen := map[int]bool{}
	for i := range 2 {
		got := p.rank(with(i, "n2"), "nobody")
		if got < 0 || got > 1 || seen[got] {
			t.Errorf("preferred n2 dead: replica %d ranks %d, want a rank 0 or 1 of its own", i, got)
		}
		seen[got] = true
	}
}

// TestPumpFailsOverWhenLeaderNodeDies: when the leader's node stops
// answering, the followers elect one of them within about one configured
// heartbeat timeout, not raft's raised one, and writes go on; every
// acknowledged write is on the new leader.
func TestPumpFailsOverWhenLeaderNodeDies(t *testing.T) {
	live := &fakeLiveness{}
	c, pump := pumpedCluster(t, 3, live)
	defer pump.Close()
	defer c.closeAll()
	c.waitLeader(t, -1)
	for s := int32(0); s < 3; s++ {
		if _, err := c.append([][]byte{makeBatch(1, fmt.Sprintf("s%d", s))}, 1, s); err != nil {
			t.Fatal(err)
		}
	}
	// On a loaded machine leadership may have moved since waitLeader: the
	// leader killed below is the one all replicas follow.
	first := c.waitFollowed(t)
	live.kill(c.addrs[first])
	c.closeReplica(first)
	second, took := c.waitLeader(t, first)
	if took >= backstop() {
		t.Fatalf("new leader after %v: raft's own timer (%v or later), not the pump, elected it", took, backstop())
	}
	base, err := c.append([][]byte{makeBatch(1, "after")}, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if base != 3 {
		t.Fatalf("write after failover at offset %d, want 3 (every acknowledged write kept once)", base)
	}
	t.Logf("leader %d -> %d in %v", first, second, took)
}

// TestPumpLaterRankWaitsForTheEarlierOne: each node finds a dead leader's
// node dead at its own moment. The replica ranked second, finding it first
// by half a heartbeat timeout, must not stand before the first-ranked one
// does: two replicas standing at once split the vote, and raft's
// candidates retry only after their raised election timeout (the bucket
// has no leader for 10-20 heartbeat timeouts). So the first-ranked replica
// wins, in one election. Each replica runs on a pump of its own, with a
// liveness view of its own.
func TestPumpLaterRankWaitsForTheEarlierOne(t *testing.T) {
	hb := 3 * pumpTuning().HeartbeatTimeout // a margin for the skew below on a loaded machine
	views := map[raft.ServerID]*fakeLiveness{}
	pumps := map[raft.ServerID]*HeartbeatPump{}
	c := newTestClusterWith(t, 3, func(cfg *Config) {
		// Each view answers LostBy from itself: the other nodes "lost"
		// the leader's node as soon as this one finds it dead, as they do
		// when they have not heard from it for half a timeout.
		if pumps[cfg.LocalID] == nil {
			views[cfg.LocalID] = &fakeLiveness{}
			pumps[cfg.LocalID] = NewHeartbeatPump(PumpConfig{HeartbeatTimeout: hb, Liveness: views[cfg.LocalID]})
		}
		cfg.Pump = pumps[cfg.LocalID]
		cfg.Raft = pumpTuning()
		cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = hb, hb, hb
	})
	defer func() {
		c.closeAll()
		for _, p := range pumps {
			p.Close()
		}
	}()
	c.waitLeader(t, -1)
	leader := c.waitFollowed(t)
	term := c.reps[leader].raft.CurrentTerm()
	dead := c.addrs[leader]
	// Every follower holds the leader's whole log: the first-ranked one
	// must not lose for a log that is behind (the second would then win,
	// rightly). The leader's end is read each time: it may still append
	// (its term's first entries) after it is first followed.
	waitFor(t, 10*time.Second, func() error {
		last := mustLastIndex(t, c.reps[leader])
		for i, r := range c.reps {
			if got := mustLastIndex(t, r); got != last {
				return fmt.Errorf("replica %d has log index %d, the leader %d", i, got, last)
			}
		}
		return nil
	})
	ranked := map[int]int{} // rank: replica
	for i, r := range c.reps {
		if i != leader {
			ranked[r.cfg.Pump.rank(r, dead)] = i
		}
	}
	first, second := ranked[0], ranked[1]
	if len(ranked) != 2 || first == second {
		t.Fatalf("ranks after leader %d: %v, want replicas at ranks 0 and 1", leader, ranked)
	}

	c.closeReplica(leader)
	views[c.layout[second].ID].kill(dead)
	time.Sleep(hb / 2)
	views[c.layout[first].ID].kill(dead)
	got, took := c.waitLeader(t, leader)
	if got != first {
		t.Fatalf("replica %d (rank 1) leads after the failover in term %d (from %d), want replica %d (rank 0): the later rank stood first",
			got, c.reps[got].raft.CurrentTerm(), term, first)
	}
	if now := c.reps[got].raft.CurrentTerm(); now != term+1 {
		t.Fatalf("new leader in term %d, want %d: more than one election", now, term+1)
	}
	if took >= BackstopScale*hb {
		t.Fatalf("new leader after %v: raft's own timer (%v or later), not the pump, elected it", took, BackstopScale*hb)
	}
}

// TestPumpRanksVotersAlike: the replicas that may replace a leader agree on
// their order (distinct ranks 0..n-2), the dead leader and dead nodes have
// none, and the order differs between groups so leadership spreads.
func TestPumpRanksVotersAlike(t *testing.T) {
	c, live, p := rankingCluster(t)
	for dead := range c.reps {
		seen := map[int]bool{}
		for i, r := range c.reps {
			rank := p.rank(r, c.addrs[dead])
			switch {
			case i == dead && rank != -1:
				t.Errorf("leader %d: replica %d ranks %d, want none", dead, i, rank)
			case i != dead && (rank < 0 || rank > 1 || seen[rank]):
				t.Errorf("leader %d: replica %d ranks %d, want a rank 0 or 1 of its own", dead, i, rank)
			}
			seen[rank] = true
		}
	}
	// A dead follower drops out: the one left is first.
	live.kill(c.addrs[2])
	if got := p.rank(c.reps[1], c.addrs[0]); got != 0 {
		t.Errorf("with replica 2 dead, replica 1 ranks %d after leader 0, want 0", got)
	}

	// Across many groups, each of the three is first for some.
	first := map[raft.ServerID]int{}
	for b := int32(0); b < 60; b++ {
		r := &Replica{cfg: Config{LocalID: c.layout[1].ID}}
		r.cfg.ID.Bucket = b
		r.raft = c.reps[1].raft
		for _, s := range c.layout[:2] { // replica 2 is dead
			r.cfg.LocalID = s.ID
			if p.rank(r, "nobody") == 0 {
				first[s.ID]++
			}
		}
	}
	if len(first) != 2 || first["n0"]+first["n1"] != 60 {
		t.Errorf("first voters over 60 groups: %v, want one of the two live replicas for each, each for some", first)
	}
}

// TestHeartbeatPumpForgetsClosedReplicas: a replica that closes is taken
// off the pump.
func TestHeartbeatPumpForgetsClosedReplicas(t *testing.T) {
	c, pump := pumpedCluster(t, 1, &fakeLiveness{})
	defer pump.Close()
	c.waitLeader(t, -1)
	pump.mu.Lock()
	n := len(pump.groups)
	pump.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d groups on the pump, want 1", n)
	}
	c.closeAll()
	pump.mu.Lock()
	defer pump.mu.Unlock()
	if len(pump.groups) != 0 {
		t.Fatalf("%d groups still on the pump after close", len(pump.groups))
	}
}

// TestPumpRestartedFollowerLeavesHealthyLeader: a follower that restarts
// and does not hear from its leader (here the leader cannot reach it) knows
// no leader; its pre-vote finds the others following the leader, so it does
// not stand, and the leader keeps its term.
func TestPumpRestartedFollowerLeavesHealthyLeader(t *testing.T) {
	c, pump := pumpedCluster(t, 3, &fakeLiveness{})
	defer pump.Close()
	defer c.closeAll()
	leader, _ := c.waitLeader(t, -1)
	if _, err := c.append([][]byte{makeBatch(1, "before")}, 1, 0); err != nil {
		t.Fatal(err)
	}
	term := c.reps[leader].Raft().CurrentTerm()
	f := (leader + 1) % 3
	c.closeReplica(f)
	c.restart(f)
	c.trans[leader].Disconnect(c.addrs[f])
	// Many of the restarted replica's looks (every tick, from half a
	// heartbeat timeout on) and pre-votes (every two heartbeat timeouts).
	time.Sleep(8 * pumpTuning().HeartbeatTimeout)
	if i := c.leader(); i != leader {
		t.Fatalf("leader %d, was %d: the restarted follower took over", i, leader)
	}
	for i, r := range c.reps {
		if got := r.Raft().CurrentTerm(); got != term {
			t.Fatalf("replica %d in term %d, the leader's is %d: someone stood for election", i, got, term)
		}
	}
}

// pumpedInmem is an in-memory transport with the caching transport's
// PumpedHeartbeat (a plain heartbeat here); heartbeats to hung targets
// block until released.
type pumpedInmem struct {
	*raft.InmemTransport
	mu    sync.Mutex
	calls map[raft.ServerAddress]int
	hung  map[raft.ServerAddress]chan struct{}
}

func (p *pumpedInmem) PumpedHeartbeat(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	p.mu.Lock()
	p.calls[target]++
	hung := p.hung[target]
	p.mu.Unlock()
	if hung != nil {
		<-hung
		return errors.New("peer hung")
	}
	return p.AppendEntries(id, target, args, resp)
}

// TestPumpHeartbeatsPastAHungFollower: a follower whose pumped heartbeat
// never returns gets no second one while it hangs, and the group's other
// follower keeps getting one every round.
func TestPumpHeartbeatsPastAHungFollower(t *testing.T) {
	trans := map[raft.ServerAddress]*pumpedInmem{}
	var mu sync.Mutex
	pump := NewHeartbeatPump(PumpConfig{HeartbeatTimeout: pumpTuning().HeartbeatTimeout, Liveness: &fakeLiveness{}})
	defer pump.Close()
	c := &testCluster{t: t}
	c.tweak = func(cfg *Config) {
		cfg.Pump = pump
		cfg.Raft = pumpTuning()
	}
	c.wrap = func(tr raft.Transport) raft.Transport {
		in := tr.(*raft.InmemTransport)
		p := &pumpedInmem{InmemTransport: in, calls: map[raft.ServerAddress]int{}, hung: map[raft.ServerAddress]chan struct{}{}}
		mu.Lock()
		trans[in.LocalAddr()] = p
		mu.Unlock()
		return p
	}
	c.init(3)
	defer c.closeAll()
	round := beatTicks * pumpTuning().HeartbeatTimeout / 4
	// A loaded machine may move leadership during the four rounds (the
	// counts are then the old leader's): such an attempt is repeated.
	for attempt := 1; ; attempt++ {
		leader, _ := c.waitLeader(t, -1)
		lt := trans[c.addrs[leader]]
		hungF, liveF := c.addrs[(leader+1)%3], c.addrs[(leader+2)%3]
		release := make(chan struct{})
		lt.mu.Lock()
		lt.hung[hungF] = release
		lt.calls[hungF], lt.calls[liveF] = 0, 0
		lt.mu.Unlock()

		time.Sleep(4*round + round/2)
		lt.mu.Lock()
		hung, live := lt.calls[hungF], lt.calls[liveF]
		delete(lt.hung, hungF)
		lt.mu.Unlock()
		close(release)
		if c.leader() != leader && attempt < 3 {
			t.Logf("attempt %d: leadership moved from %d during the rounds; again", attempt, leader)
			continue
		}
		if hung != 1 {
			t.Errorf("hung follower got %d pumped heartbeats in 4 rounds, want the one still out", hung)
		}
		if live < 3 {
			t.Errorf("live follower got %d pumped heartbeats in 4 rounds, want one a round", live)
		}
		return
	}
}

// TestQuorumGrantsDecidesWithoutTheSilent: a pre-vote waits for the
// voters' answers, but a voter that does not answer (cut off from the
// network) holds it back no longer than the wait, after which the answers
// in decide; a quorum out of reach fails at once.
func TestQuorumGrantsDecidesWithoutTheSilent(t *testing.T) {
	const (
		never = time.Hour
		short = 50 * time.Millisecond
	)
	for _, tc := range []struct {
		name    string
		answers []bool // the answers that come; the rest never do
		voters  int
		wait    time.Duration
		want    bool
	}{
		{"one of two others grants, the other is silent", []bool{true}, 3, short, true},
		{"one of two others refuses, the other is silent", []bool{false}, 3, short, false},
		{"both others grant", []bool{true, true}, 3, never, true},
		{"one grants, one refuses", []bool{false, true}, 3, never, true},
		{"both others refuse", []bool{false, false}, 3, never, false},
		{"two of four others grant, two are silent", []bool{true, true}, 5, short, true},
		{"two of four others grant, two refuse", []bool{true, false, true, false}, 5, never, true},
		{"three of four others refuse", []bool{false, false, false}, 5, never, false},
		{"sole voter", nil, 1, never, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			granted := make(chan bool, tc.voters)
			for _, a := range tc.answers {
				granted <- a
			}
			done := make(chan bool, 1)
			go func() { done <- quorumGrants(granted, tc.voters-1, tc.voters, tc.wait) }()
			select {
			case got := <-done:
				if got != tc.want {
					t.Fatalf("quorumGrants = %v, want %v", got, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("quorumGrants waited for an answer that does not decide the outcome")
			}
		})
	}
}

// TestPumpLeavesALeaderTheOthersHear: a follower whose node alone lost the
// leader's node (a network cut between the two) does not stand for
// election while the other voters still hear from it: standing would raise
// the term and unseat a working leader. Once a quorum lost it, the group
// fails over as usual.
func TestPumpLeavesALeaderTheOthersHear(t *testing.T) {
	const n = 3
	views := make(map[raft.ServerAddress]*fakeLiveness, n)
	pumps := make(map[raft.ServerID]*HeartbeatPump, n)
	for i := range n {
		v := &fakeLiveness{views: views}
		views[raft.ServerAddress(fmt.Sprintf("r%d", i))] = v
		pumps[raft.ServerID(fmt.Sprintf("n%d", i))] = NewHeartbeatPump(PumpConfig{HeartbeatTimeout: pumpTuning().HeartbeatTimeout, Liveness: v})
	}
	c := newTestClusterWith(t, n, func(cfg *Config) {
		cfg.Pump = pumps[cfg.LocalID]
		cfg.Raft = pumpTuning()
	})
	defer func() {
		c.closeAll()
		for _, p := range pumps {
			p.Close()
		}
	}()
	c.waitLeader(t, -1)
	if _, err := c.append([][]byte{makeBatch(1, "a")}, 1, 0); err != nil {
		t.Fatal(err)
	}
	leader := c.waitFollowed(t)
	term := c.reps[leader].raft.CurrentTerm()
	cut, other := (leader+1)%n, (leader+2)%n
	stats := func(i int) PumpStats { return pumps[c.layout[i].ID].Stats() }
	before := stats(cut).Elections + stats(other).Elections

	// Replica cut's node loses the leader's; the other follower's does not.
	views[c.addrs[cut]].kill(c.addrs[leader])
	hb := pumpTuning().HeartbeatTimeout
	waitFor(t, backstop()/2, func() error {
		if stats(cut).HeldBack < 2 {
			return fmt.Errorf("held back %d times, want the follower to have asked twice", stats(cut).HeldBack)
		}
		return nil
	})
	if got := stats(cut).Elections + stats(other).Elections; got != before {
		t.Fatalf("%d elections stood while the leader's node was lost by one follower only", got-before)
	}
	if now := c.leader(); now != leader || c.reps[leader].raft.CurrentTerm() != term {
		t.Fatalf("leader %d in term %d, want %d in term %d still", now, c.reps[now].raft.CurrentTerm(), leader, term)
	}

	// The other follower's node loses it too: a quorum lost it.
	views[c.addrs[other]].kill(c.addrs[leader])
	c.closeReplica(leader)
	next, took := c.waitLeader(t, leader)
	if took >= backstop() {
		t.Fatalf("new leader after %v: raft's own timer (%v or later), not the pump, elected it", took, backstop())
	}
	if _, err := c.append([][]byte{makeBatch(1, "b")}, 1, 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %d -> %d in %v (heartbeat timeout %v)", leader, next, took, hb)
}
