package peer

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Heartbeat cache. hashicorp/raft's leader sends every follower of every
// group a heartbeat each HeartbeatTimeout/10 to 2×that; a node holding
// hundreds of groups spends most of its idle CPU on them even in batches
// (heartbeat.go). A follower only needs contact within its HeartbeatTimeout
// to stay a follower, so a group that enables the cache answers a heartbeat
// itself when the same follower acknowledged the same leader term less than
// maxAge ago: the answer is a copy of that acknowledgement. Only timer-driven
// traffic is saved: real heartbeats must still reach each follower well
// within its HeartbeatTimeout. The node sends them itself: its heartbeat
// pump sends every group's heartbeats past the cache (PumpedHeartbeat) every
// 2/5 of the groups' raft HeartbeatTimeout, and maxAge is two such rounds
// (node/replica pump.go), so raft's own heartbeats are all answered here.
//
// What a cached answer changes in raft: the leader's contact time with that
// follower (its lease check, so a cut-off leader steps down up to maxAge
// later), and a raft.VerifyLeader round may be satisfied by a cached answer.
// A group that caches must therefore confirm leadership for linearizable
// reads with FreshHeartbeat, not VerifyLeader (node/replica does).
//
// The same holds for the AppendEntries raft's replication loop sends every
// CommitTimeout while nothing new is replicated: a pipeline answers such a
// request itself when it repeats the last request it wrote (same term,
// previous entry and commit index, no entries), that request was accepted,
// the follower acknowledged a heartbeat within twice the cache age (real
// heartbeats reach it at least that often while it answers) and the session
// is up (pipeline.go). The follower already holds everything the request says; a
// restarted follower comes back on a new session, so a new pipeline, and
// learns the commit index again.

type hbCacheEntry struct {
	term uint64
	at   time.Time // when the acknowledged heartbeat was sent
	resp raft.AppendEntriesResponse
}

type hbCache struct {
	mu      sync.Mutex
	maxAge  time.Duration
	entries map[raft.ServerAddress]hbCacheEntry
}

// CacheHeartbeats makes the group answer raft's heartbeats to a follower
// from that follower's last acknowledgement while it is younger than maxAge
// (see above); 0 turns the cache off. Call it before raft starts.
func (t *Transport) CacheHeartbeats(maxAge time.Duration) {
	t.hbc.mu.Lock()
	defer t.hbc.mu.Unlock()
	t.hbc.maxAge = maxAge
	t.hbc.entries = nil
}

// FreshHeartbeat sends a heartbeat to target whatever the cache holds, and
// without waiting for the batch delay: an answer is a statement the
// follower made after this call began. A successful answer refreshes the
// cache.
func (t *Transport) FreshHeartbeat(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.heartbeat(target, t.prog.sending(), args, resp, true)
}

// PumpedHeartbeat sends a heartbeat to target whatever the cache holds, in
// the next batch bound for target's node: a node's heartbeat pump
// (node/replica pump.go) sends those of all its groups at once this way,
// and their acknowledgements refresh the cache from which raft's own
// heartbeats are answered in between. A successful answer refreshes the
// cache.
func (t *Transport) PumpedHeartbeat(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.heartbeat(target, t.prog.sending(), args, resp, false)
}

// answer answers args from the cache when it may; it reports whether it
// did.
func (c *hbCache) answer(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	e, ok := c.fresh(target, args.Term, 1)
	if ok {
		*resp = e.resp
	}
	return ok
}

// fresh returns target's acknowledgement of term if it is younger than
// scale × maxAge.
func (c *hbCache) fresh(target raft.ServerAddress, term uint64, scale time.Duration) (hbCacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxAge <= 0 {
		return hbCacheEntry{}, false
	}
	e, ok := c.entries[target]
	if !ok || e.term != term || time.Since(e.at) >= scale*c.maxAge {
		return hbCacheEntry{}, false
	}
	return e, true
}

// note records the outcome of a heartbeat sent at start: an acknowledgement
// of args.Term is cached, anything else drops the entry.
func (c *hbCache) note(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, start time.Time, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxAge <= 0 {
		return
	}
	if err != nil || !resp.Success || resp.Term != args.Term {
		delete(c.entries, target)
		return
	}
	if e, ok := c.entries[target]; ok && e.term == args.Term && e.at.After(start) {
		return // a later acknowledgement is already cached
	}
	if c.entries == nil {
		c.entries = make(map[raft.ServerAddress]hbCacheEntry)
	}
	c.entries[target] = hbCacheEntry{term: args.Term, at: start, resp: *resp}
}
