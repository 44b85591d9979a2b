package replica

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/rpc/peer"
)

// In-sync replicas: which servers of a group keep up with its leader, as
// Kafka's and Fluss's ISR say. Raft commits with any majority, so a
// replica that is down or falling behind costs no write, and nothing
// shows it until a second one fails and the group stops. Operators need
// to see it first: a bucket with fewer in-sync replicas than assigned is
// under-replicated.
//
// A follower is in sync when, within the last maxLag, it answered a
// request of its leader showing that it held every entry the leader's log
// held when the request was sent (rpc/peer progress.go records that from
// the answers; heartbeats count, so an idle follower stays in sync). A
// leader that has led for less than maxLag counts every follower in sync
// until it has heard otherwise for maxLag, as Kafka's new leaders do.

// progressTracker is a transport that records its followers' progress
// (rpc/peer.Transport.TrackProgress).
type progressTracker interface {
	TrackProgress(lastIndex func() uint64)
	Progress(target raft.ServerAddress) (peer.Progress, bool)
}

// lastIndex is the last raft index the log holds (0 once closed).
func (r *Replica) lastIndex() uint64 {
	i, _ := r.log.LastIndex()
	return i
}

// InSync returns the servers of the group's latest configuration that are
// in sync with this replica, which must lead the group: itself and every
// other server that caught up with it within maxLag. ok is false when this
// replica does not lead or its transport does not record progress.
func (r *Replica) InSync(maxLag time.Duration) (servers []raft.ServerID, ok bool) {
	pt, tracks := r.cfg.Transport.(progressTracker)
	r.mu.Lock()
	t := r.term
	r.mu.Unlock()
	if !tracks || t == nil || r.raft.State() != raft.Leader {
		return nil, false
	}
	f := r.raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	now := time.Now()
	for _, s := range f.Configuration().Servers {
		if s.ID != r.cfg.LocalID {
			caughtUp := t.since
			if p, ok := pt.Progress(s.Address); ok && p.CaughtUp.After(caughtUp) {
				caughtUp = p.CaughtUp
			}
			if now.Sub(caughtUp) > maxLag {
				continue
			}
		}
		servers = append(servers, s.ID)
	}
	return servers, true
}
