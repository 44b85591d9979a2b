package peer

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// scriptedFollower answers heartbeats of group "g" on m with Success and
// the term it is set to, counting the heartbeats that reach it.
type scriptedFollower struct {
	term    atomic.Uint64
	reached atomic.Int64
}

func (f *scriptedFollower) serve(t *testing.T, m *Mux) {
	tr, err := m.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	tr.SetHeartbeatHandler(func(rpc raft.RPC) {
		f.reached.Add(1)
		req := rpc.Command.(*raft.AppendEntriesRequest)
		term := f.term.Load()
		rpc.Respond(&raft.AppendEntriesResponse{Term: term, Success: req.Term == term}, nil)
	})
}

func TestHeartbeatCache(t *testing.T) {
	leader, remote := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	defer leader.Close()
	defer remote.Close()
	var f scriptedFollower
	f.term.Store(5)
	f.serve(t, remote)
	tr, err := leader.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const maxAge = 300 * time.Millisecond
	tr.CacheHeartbeats(maxAge)
	target := raft.ServerAddress(remote.Addr())
	hb := func(term uint64) raft.AppendEntriesResponse {
		t.Helper()
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("l"), Addr: []byte(leader.Addr())}, Term: term}
		var resp raft.AppendEntriesResponse
		if err := tr.AppendEntries("f", target, req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	step := func(name string, term uint64, wantReached int64, wantSuccess bool) {
		t.Helper()
		resp := hb(term)
		if got := f.reached.Load(); got != wantReached || resp.Success != wantSuccess {
			t.Fatalf("%s: follower reached %d times, success %v; want %d, %v", name, got, resp.Success, wantReached, wantSuccess)
		}
	}

	start := time.Now()
	step("first heartbeat", 5, 1, true)
	step("repeat within maxAge", 5, 1, true)
	step("repeat within maxAge", 5, 1, true)
	if time.Since(start) >= maxAge {
		t.Skip("machine too slow to observe the cache window")
	}
	if c := leader.CachedHeartbeats(); c != 2 {
		t.Fatalf("CachedHeartbeats = %d, want 2", c)
	}
	step("another term", 6, 2, false) // the follower is in term 5: refused, not cached
	step("refusal not cached", 6, 3, false)
	f.term.Store(6)
	step("accepted in term 6", 6, 4, true)
	step("cached in term 6", 6, 4, true)
	time.Sleep(maxAge)
	step("expired", 6, 5, true)

	// FreshHeartbeat always reaches the follower, and sees its current answer.
	f.term.Store(7)
	var resp raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("l"), Addr: []byte(leader.Addr())}, Term: 6}
	if err := tr.FreshHeartbeat("f", target, req, &resp); err != nil {
		t.Fatal(err)
	}
	if f.reached.Load() != 6 || resp.Success || resp.Term != 7 {
		t.Fatalf("FreshHeartbeat: reached %d, answer %+v", f.reached.Load(), resp)
	}
	step("refusal dropped the cached answer", 6, 7, false)

	tr.CacheHeartbeats(0)
	f.term.Store(6)
	step("cache off", 6, 8, true)
	step("cache off", 6, 9, true)

	// Past maxAge, an unreachable follower is an error, never the old answer.
	tr.CacheHeartbeats(maxAge)
	step("accepted", 6, 10, true)
	remote.Close()
	step("cached while the follower is gone", 6, 10, true)
	time.Sleep(maxAge)
	req = &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("l"), Addr: []byte(leader.Addr())}, Term: 6}
	if err := tr.AppendEntries("f", target, req, &resp); err == nil {
		t.Fatalf("heartbeat to a closed node past maxAge answered %+v", resp)
	}
}

// Groups that cache heartbeats stay stable while idle and send a fraction
// of the heartbeats raft asks for.
func TestHeartbeatCacheKeepsGroupsStable(t *testing.T) {
	ms := []*Mux{listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	groups := groupsOverWith(t, ms, 20, func(tr *Transport) { tr.CacheHeartbeats(400 * time.Millisecond) })
	defer stopGroups(t, groups)
	before := leaders(groups)
	var sent0, cached0 int64
	for _, m := range ms {
		h, _ := m.HeartbeatStats()
		sent0, cached0 = sent0+h, cached0+m.CachedHeartbeats()
	}
	time.Sleep(3 * time.Second)
	var sent, cached int64
	for _, m := range ms {
		h, _ := m.HeartbeatStats()
		sent, cached = sent+h-sent0, cached+m.CachedHeartbeats()-cached0
	}
	if after := leaders(groups); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("leaders changed while idle: %v -> %v", before, after)
	}
	t.Logf("%d heartbeats sent, %d answered from the cache", sent, cached)
	// About two of three when the heartbeat loops run on time (every
	// 100-200 ms, cache age 400 ms); a starved machine delays them.
	if sent == 0 || cached*2 < sent {
		t.Fatalf("%d heartbeats sent, %d cached: the cache should answer at least a third", sent, cached)
	}
	for _, reps := range groups {
		applyN(t, reps[leaderOf(t, reps)].r, 3)
	}
}

// While a group is idle, raft's replication loop repeats the same
// AppendEntries every CommitTimeout; pipelines answer the repeats
// themselves. A follower that restarts (its applied state is gone: this
// FSM lives in memory) comes back on a new session and learns the commit
// index again: it re-applies every committed entry without any new write.
func TestIdleAppendsRepeatAndRestartedFollowerCatchesUp(t *testing.T) {
	ms := []*Mux{listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	cache := func(tr *Transport) { tr.CacheHeartbeats(400 * time.Millisecond) }
	groups := groupsOverWith(t, ms, 1, cache)
	reps := groups[0]
	defer stopGroups(t, groups)
	lead := leaderOf(t, reps)
	applyN(t, reps[lead].r, 5)
	for i, rp := range reps {
		waitFor(t, 10*time.Second, func() error {
			if err := sameState(reps[lead].fsm, rp.fsm); err != nil {
				return fmt.Errorf("replica %d: %w", i, err)
			}
			return nil
		})
	}
	r0 := ms[lead].RepeatedAppends()
	time.Sleep(time.Second) // CommitTimeout is 5 ms: ~200 idle rounds per follower
	if n := ms[lead].RepeatedAppends() - r0; n < 20 {
		t.Fatalf("only %d idle AppendEntries answered by their pipeline in 1 s", n)
	}

	f := (lead + 1) % 3
	addr := ms[f].Addr()
	reps[f].stop(t)
	ms[f].Close()
	ms[f] = listen(t, addr)
	tr, err := ms[f].Transport("g0")
	if err != nil {
		t.Fatal(err)
	}
	cache(tr)
	c := testConfig(reps[f].id)
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 800*time.Millisecond
	reps[f].fsm, reps[f].tr = &counterFSM{}, tr
	if reps[f].r, err = raft.NewRaft(c, reps[f].fsm, reps[f].logs, reps[f].logs, reps[f].snaps, tr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error { return sameState(reps[lead].fsm, reps[f].fsm) })
	if n, _, _ := reps[f].fsm.state(); n != 5 {
		t.Fatalf("restarted follower applied %d entries, want 5", n)
	}
}
