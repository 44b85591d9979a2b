package peer

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Follower progress. A group's leader reports which of its followers keep
// up with it (the in-sync replicas of Kafka and Fluss), but hashicorp/raft
// keeps its per-follower state to itself. Every answer a follower gives
// its leader passes through the transport, and each carries the
// follower's last log index (raft puts it in every AppendEntries answer,
// heartbeats included), so the transport records what the answers say.
//
// Only answers the follower really gave count: the heartbeat cache's
// copies and a pipeline's local repeats (hbcache.go) record nothing.

// Progress is what a follower's answers told this server.
type Progress struct {
	// Matched is the follower's last log index in its latest successful
	// answer.
	Matched uint64
	// CaughtUp is when the latest request was sent whose successful answer
	// showed the follower holding every entry this server's log held then.
	CaughtUp time.Time
	// Contact is when the latest request was sent that the follower
	// answered (successfully or not).
	Contact time.Time
}

type progressTracker struct {
	mu        sync.Mutex
	lastIndex func() uint64
	peers     map[raft.ServerAddress]*peerProgress
}

type peerProgress struct {
	Progress
	matchedAt time.Time // when the request was sent whose answer set Matched
}

// TrackProgress makes the group record its followers' progress from their
// answers (Progress). lastIndex returns the last index of this server's
// log; it is read as each request is sent. Call it before raft starts.
func (t *Transport) TrackProgress(lastIndex func() uint64) {
	t.prog.mu.Lock()
	defer t.prog.mu.Unlock()
	t.prog.lastIndex = lastIndex
}

// Progress returns what target's answers told this group, false if it
// has not answered since TrackProgress.
func (t *Transport) Progress(target raft.ServerAddress) (Progress, bool) {
	t.prog.mu.Lock()
	defer t.prog.mu.Unlock()
	p, ok := t.prog.peers[target]
	if !ok {
		return Progress{}, false
	}
	return p.Progress, true
}

// sent is what the tracker needs of a request it is about to send: when,
// and the last index of the local log at that moment.
type sent struct {
	at   time.Time
	last uint64
}

// sending notes a request about to be sent.
func (p *progressTracker) sending() sent {
	p.mu.Lock()
	fn := p.lastIndex
	p.mu.Unlock()
	s := sent{at: time.Now()}
	if fn != nil {
		s.last = fn()
	}
	return s
}

// answered records target's answer resp to a request noted as s; err is
// the transport's error (nothing was answered).
func (p *progressTracker) answered(target raft.ServerAddress, s sent, resp *raft.AppendEntriesResponse, err error) {
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastIndex == nil {
		return
	}
	pr := p.peers[target]
	if pr == nil {
		if p.peers == nil {
			p.peers = make(map[raft.ServerAddress]*peerProgress)
		}
		pr = &peerProgress{}
		p.peers[target] = pr
	}
	if s.at.After(pr.Contact) {
		pr.Contact = s.at
	}
	if !resp.Success {
		return
	}
	// Answers of different streams (pipeline, heartbeats) may come in any
	// order: the latest request sent decides.
	if !s.at.Before(pr.matchedAt) {
		pr.Matched, pr.matchedAt = resp.LastLog, s.at
	}
	if resp.LastLog >= s.last && s.at.After(pr.CaughtUp) {
		pr.CaughtUp = s.at
	}
}
