package replica

import (
	"sync"
	"sync/atomic"
	"time"
)

// HeartbeatPump drives the heartbeats of every bucket group a node leads
// from one ticker.
//
// hashicorp/raft's leader runs one heartbeat goroutine per follower, each on
// its own timer of HeartbeatTimeout/10 to /5 at a random phase. A node
// leading hundreds of groups then wakes thousands of times a second at
// scattered instants, and each wake costs the Go scheduler a sleep/wake-up
// cycle (futex, epoll): most of a busy node's idle CPU (docs/BENCHMARKS.md).
// The same work done in one burst per tick costs a tenth of that.
//
// So a group that gains leadership raises its own HeartbeatTimeout
// (ReloadConfig, leader side only: followers keep theirs, which is what
// decides when they stand for election) so that raft's timers fire rarely,
// and the pump asks every led group for a leadership check
// (raft.VerifyLeader) each interval: raft answers it by waking every
// heartbeat goroutine of the group at once, so the heartbeats of all groups
// go out together, the transport batches them per peer (rpc/peer), and their
// acknowledgements refresh the leader's contact times (its lease) as a timed
// heartbeat does. The result of the check is not used: reads confirm
// leadership themselves (leadership.go).
//
// raft's own timer stays as a fallback at the raised timeout's tenth, so a
// leader whose pump stalls still heartbeats, only slower. The pump's
// interval must leave followers contact well within their HeartbeatTimeout
// and the leader within its LeaderLeaseTimeout. The node uses 2/5 of the
// HeartbeatTimeout: longer than the age up to which rpc/peer answers a
// heartbeat from its cache (1/3), so every pumped heartbeat reaches its
// follower, which hears from its leader every 0.4 HeartbeatTimeout (0.8
// when one is lost, still under the 1-2 it waits).
//
// The price: pumped heartbeats pass through the group's leader loop, which
// blocks while it stores entries. A leader stuck there for about a
// HeartbeatTimeout (a disk stall) loses its followers, where raft's
// separate heartbeat goroutines would have kept them. And raft caps the
// retry backoff of heartbeats to an unreachable follower at half the
// leader's (raised) timeout, so a follower that comes back may wait up to
// 5 HeartbeatTimeouts for its first heartbeat; meanwhile it asks for
// pre-votes, which the others refuse while they know a leader, and the
// replication loop (its own backoff, unchanged) reaches it as before.
type HeartbeatPump struct {
	interval time.Duration

	mu     sync.Mutex
	groups map[*Replica]*pumpGroup

	quit chan struct{}
	done chan struct{}
}

// pumpGroup is a led group on the pump; busy is set while its last check is
// unanswered (a group whose leader loop is stuck gets no second one).
type pumpGroup struct {
	r    *Replica
	busy atomic.Bool
}

// leaderHeartbeatScale is how much a leader raises its HeartbeatTimeout
// while it is on a pump: raft's own heartbeats then come every 1–2
// HeartbeatTimeouts (a fallback) instead of every 0.1–0.2.
const leaderHeartbeatScale = 10

// NewHeartbeatPump starts a pump that checks every led group each interval.
func NewHeartbeatPump(interval time.Duration) *HeartbeatPump {
	p := &HeartbeatPump{
		interval: interval,
		groups:   make(map[*Replica]*pumpGroup),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go p.run()
	return p
}

// Close stops the pump. Groups still on it keep their raised timeout until
// they lose leadership or close.
func (p *HeartbeatPump) Close() {
	close(p.quit)
	<-p.done
}

func (p *HeartbeatPump) run() {
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	var groups []*pumpGroup
	for {
		select {
		case <-t.C:
		case <-p.quit:
			return
		}
		groups = groups[:0]
		p.mu.Lock()
		for _, g := range p.groups {
			groups = append(groups, g)
		}
		p.mu.Unlock()
		for _, g := range groups {
			if g.r.soleVoter() {
				continue // no follower to heartbeat
			}
			if !g.busy.CompareAndSwap(false, true) {
				continue
			}
			// VerifyLeader waits only for room in raft's verify queue, but
			// its answer waits for the followers: wait for it apart.
			go func() {
				_ = g.r.raft.VerifyLeader().Error()
				g.busy.Store(false)
			}()
		}
	}
}

// lead puts r on the pump and raises its heartbeat timeout; follow does the
// reverse. The order keeps heartbeats flowing: pumped before raft's own slow
// down, raft's own back before the pump stops.
func (p *HeartbeatPump) lead(r *Replica) {
	p.mu.Lock()
	if _, ok := p.groups[r]; !ok {
		p.groups[r] = &pumpGroup{r: r}
	}
	p.mu.Unlock()
	r.setHeartbeatTimeout(leaderHeartbeatScale*r.tuning.HeartbeatTimeout, leaderHeartbeatScale*r.tuning.ElectionTimeout)
}

func (p *HeartbeatPump) follow(r *Replica) {
	r.setHeartbeatTimeout(r.tuning.HeartbeatTimeout, r.tuning.ElectionTimeout)
	p.remove(r)
}

// remove takes r off the pump (r is closing).
func (p *HeartbeatPump) remove(r *Replica) {
	p.mu.Lock()
	delete(p.groups, r)
	p.mu.Unlock()
}

// setHeartbeatTimeout reloads raft's HeartbeatTimeout and ElectionTimeout
// (raft wants the second no shorter than the first; a leader uses neither
// for anything but its heartbeat timers). Lowering the heartbeat timeout
// resets a follower's election timer at once (raft.ReloadConfig), so a
// replica that lost leadership under the raised timeout is back on its own
// at once.
func (r *Replica) setHeartbeatTimeout(heartbeat, election time.Duration) {
	rc := r.raft.ReloadableConfig()
	if rc.HeartbeatTimeout == heartbeat && rc.ElectionTimeout == election {
		return
	}
	rc.HeartbeatTimeout, rc.ElectionTimeout = heartbeat, election
	if err := r.raft.ReloadConfig(rc); err != nil {
		r.logger.Warn("reload raft timeouts", "heartbeat", heartbeat, "election", election, "err", err)
	}
}
