package peer

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestFollowerProgress: a group that tracks progress records what its
// follower's real answers say (over a unary AppendEntries, a pipeline and
// heartbeats), and nothing from cached answers, refusals' log state or
// failed sends.
func TestFollowerProgress(t *testing.T) {
	_, b, leader, follower := gatePair(t)
	target := raft.ServerAddress(b.Addr())

	// The follower's log: it holds up to last; refuse makes it turn down
	// entries (as a follower whose log does not match would).
	var last atomic.Uint64
	var refuse atomic.Bool
	answer := func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		resp := &raft.AppendEntriesResponse{Term: req.Term, LastLog: last.Load()}
		if n := len(req.Entries); n > 0 && !refuse.Load() {
			last.Store(req.Entries[n-1].Index)
			resp.LastLog = last.Load()
		}
		resp.Success = !refuse.Load()
		rpc.Respond(resp, nil)
	}
	follower.SetHeartbeatHandler(answer)
	consume(t, follower, answer)

	var leaderLast atomic.Uint64
	leader.TrackProgress(leaderLast.Load)
	if _, ok := leader.Progress(target); ok {
		t.Fatal("progress known before any answer")
	}
	entries := func(from, to uint64) *raft.AppendEntriesRequest {
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("l"), Addr: []byte("l")}, Term: 3, PrevLogEntry: from - 1, PrevLogTerm: 3}
		for i := from; i <= to; i++ {
			req.Entries = append(req.Entries, &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: []byte("x")})
		}
		return req
	}
	heartbeat := func() *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("l"), Addr: []byte("l")}, Term: 3}
	}
	progress := func(what string) Progress {
		t.Helper()
		p, ok := leader.Progress(target)
		if !ok {
			t.Fatalf("%s: no progress recorded", what)
		}
		return p
	}
	var resp raft.AppendEntriesResponse

	// Unary AppendEntries of everything the leader has: caught up.
	leaderLast.Store(10)
	before := time.Now()
	if err := leader.AppendEntries("f", target, entries(1, 10), &resp); err != nil || !resp.Success {
		t.Fatalf("append: %v %+v", err, resp)
	}
	p := progress("append 1..10")
	if p.Matched != 10 || p.CaughtUp.Before(before) || p.Contact != p.CaughtUp {
		t.Fatalf("after append 1..10: %+v (sent after %v)", p, before)
	}

	// The leader moved on; a heartbeat answered with the old last index
	// is contact, not catching up.
	leaderLast.Store(20)
	caughtUp := p.CaughtUp
	if err := leader.AppendEntries("f", target, heartbeat(), &resp); err != nil {
		t.Fatal(err)
	}
	p = progress("heartbeat behind")
	if p.Matched != 10 || p.CaughtUp != caughtUp || !p.Contact.After(caughtUp) {
		t.Fatalf("after a heartbeat answered at 10 with the leader at 20: %+v", p)
	}

	// A pipeline brings it up to date.
	pl, err := leader.AppendEntriesPipeline("f", target)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	f, err := pl.AppendEntries(entries(11, 20), new(raft.AppendEntriesResponse))
	if err != nil {
		t.Fatal(err)
	}
	if got := <-pl.Consumer(); got.Error() != nil || got != f {
		t.Fatalf("pipeline answer: %v", got.Error())
	}
	p = progress("pipeline 11..20")
	if p.Matched != 20 || !p.CaughtUp.After(caughtUp) {
		t.Fatalf("after pipelined 11..20: %+v", p)
	}

	// Heartbeats answered from the cache say nothing new.
	leader.CacheHeartbeats(time.Minute)
	if err := leader.PumpedHeartbeat("f", target, heartbeat(), &resp); err != nil {
		t.Fatal(err)
	}
	pumped := progress("pumped heartbeat")
	if !pumped.Contact.After(p.Contact) || pumped.CaughtUp != pumped.Contact {
		t.Fatalf("pumped heartbeat of a caught-up follower: %+v, before %+v", pumped, p)
	}
	if err := leader.AppendEntries("f", target, heartbeat(), &resp); err != nil || !resp.Success {
		t.Fatalf("cached heartbeat: %v %+v", err, resp)
	}
	if p = progress("cached heartbeat"); p != pumped {
		t.Fatalf("a cached answer changed the progress: %+v, was %+v", p, pumped)
	}

	// A refusal is contact; it leaves Matched and CaughtUp alone.
	refuse.Store(true)
	leaderLast.Store(30)
	if err := leader.AppendEntries("f", target, entries(21, 30), &resp); err != nil || resp.Success {
		t.Fatalf("refused append: %v %+v", err, resp)
	}
	p = progress("refused")
	if p.Matched != 20 || p.CaughtUp != pumped.CaughtUp || !p.Contact.After(pumped.Contact) {
		t.Fatalf("after a refusal: %+v, was %+v", p, pumped)
	}

	// Nothing answered, nothing recorded.
	b.Close()
	refused := p
	if err := leader.FreshHeartbeat("f", target, heartbeat(), &resp); err == nil {
		t.Fatal("heartbeat to a closed node answered")
	}
	if p = progress("unreachable"); p != refused {
		t.Fatalf("a failed send changed the progress: %+v, was %+v", p, refused)
	}
}
