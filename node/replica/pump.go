package replica

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// HeartbeatPump keeps the bucket groups of a node quiet when idle: one
// ticker sends the heartbeats of every group the node leads and watches the
// leaders of every group it follows, where hashicorp/raft alone runs timers
// per group and per follower.
//
// Why: raft's leader runs one heartbeat goroutine per follower, each on its
// own timer of HeartbeatTimeout/10 to /5 at a random phase, a lease timer,
// and each follower an election timer. A node holding hundreds of groups
// then wakes thousands of times a second at scattered instants, and each
// wake costs the Go scheduler a sleep/wake-up cycle (futex, epoll): most of
// an idle node's CPU (docs/BENCHMARKS.md).
//
// How:
//
//   - Every replica on a pump runs raft with BackstopScale times the
//     configured heartbeat, election and lease timeouts (RaftTuning.onPump).
//     raft's own timers become a slow backstop.
//   - Heartbeats: every 2/5 of the raised heartbeat timeout the pump sends
//     each other voter of every group it leads one heartbeat of the leader's
//     term (heartbeat). Through rpc/peer they go past the group's
//     heartbeat cache and share frames with all other groups' heartbeats to
//     the same node; raft's own heartbeats in between are answered from the
//     cache of their acknowledgements (HeartbeatCacheAge), which keeps the
//     leader's lease, while the pumped ones keep the followers' contact.
//   - Failure detection: liveness is a property of nodes, not of groups.
//     Every quarter of the configured HeartbeatTimeout the pump looks at the
//     groups it follows: when the node of a group's leader does not answer
//     the node's pings (Liveness: about a HeartbeatTimeout), the group's first
//     surviving voter in a per-group order (its preferred leader first, see
//     rank) stands for election at once (campaign: raft's TimeoutNow, as a
//     leadership transfer starts one, so the other voters vote though they
//     still know the dead leader); the next one stands a tick after the
//     first one raised the term if there is still no leader (the first
//     one's log was behind), or a heartbeat timeout per earlier rank when
//     it saw none stand (two that stand in one term split the vote, and
//     raft's candidates retry only after their raised election timeout);
//     but only when a quorum of the group's voters lost the leader's node
//     too (quorumLost: a node cut off from the leader's alone leaves it
//     be). A replica that knows no leader (its group was just created, or
//     it restarted) stands the same way, but only after a pre-vote round
//     finds a quorum of voters that know no leader either (preVote), so a
//     healthy leader it has not heard from yet stays. So failover takes
//     about one configured HeartbeatTimeout, as before, at a fraction of
//     the idle work.
//
// Terms and the log check still decide every election, so a wrong liveness
// view can only move leadership, never lose or duplicate a write.
//
// What is slower: a leader whose node answers but whose group is stuck
// (its leader loop blocked, say by a disk stall) is replaced only by raft's
// backstop, after 10-20 HeartbeatTimeouts; a leader cut off from its
// followers keeps its lease up to HeartbeatCacheAge plus the raised lease
// (it cannot commit meanwhile, and reads confirm leadership with a quorum
// first; its node refuses writes and lookups once it finds the followers'
// nodes dead, which is why heartbeat keeps them watched); a follower that
// restarts learns its leader from the next pumped heartbeat or
// replication, seconds later, and until then stands only if a quorum
// knows no leader.
type HeartbeatPump struct {
	cfg PumpConfig

	mu     sync.Mutex
	groups map[*Replica]*pumpGroup

	elections atomic.Uint64 // campaigns started (see PumpStats)
	heldBack  atomic.Uint64

	quit chan struct{}
	done chan struct{}
}

// PumpStats counts the elections the pump's failure detection started.
type PumpStats struct {
	// Elections is how many times a replica stood for election because
	// its leader's node stopped answering or it knew no leader.
	Elections uint64
	// HeldBack is how many times a replica whose leader's node stopped
	// answering here did not stand, because a quorum of its group's voters
	// still heard from that node (this node alone is cut off from it).
	HeldBack uint64
}

// Stats returns the pump's counters.
func (p *HeartbeatPump) Stats() PumpStats {
	return PumpStats{Elections: p.elections.Load(), HeldBack: p.heldBack.Load()}
}

// BackstopScale is how much longer than configured the raft timeouts of a
// replica on a pump are.
const BackstopScale = 10

// PumpConfig configures a HeartbeatPump.
type PumpConfig struct {
	// HeartbeatTimeout is the configured one: how long a leader's node may
	// be silent before its groups elect another leader.
	HeartbeatTimeout time.Duration
	// Liveness tells whether a peer node answers. nil: no failure
	// detection (raft's backstop timers elect, BackstopScale times slower).
	Liveness Liveness
}

// Liveness is the node's view of its peers.
type Liveness interface {
	// Alive reports whether the node at this peer address answered within
	// the last HeartbeatTimeout.
	Alive(addr raft.ServerAddress) bool
	// LostBy reports whether the node at by has also stopped hearing from
	// the node at addr, which this node finds dead. It may ask by over
	// the network, and takes no longer than HeartbeatTimeout.
	LostBy(by, addr raft.ServerAddress) bool
}

// pumpGroup is a replica on the pump. busy is set while its last leadership
// check or campaign is unanswered (a group whose raft loop is stuck gets no
// second one); the rest is owned by the pump's loop.
type pumpGroup struct {
	r     *Replica
	busy  atomic.Bool
	added time.Time

	leader  raft.ServerAddress // the dead leader suspected, "" if none
	suspect time.Time          // since when
	term    uint64             // the term then
	stood   bool               // the term moved since: another replica stood
	tried   time.Time          // last campaign asked for

	out map[raft.ServerID]*atomic.Bool // per other voter: a pumped heartbeat is unanswered
}

// NewHeartbeatPump starts a pump.
func NewHeartbeatPump(cfg PumpConfig) *HeartbeatPump {
	p := &HeartbeatPump{
		cfg:    cfg,
		groups: make(map[*Replica]*pumpGroup),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go p.run()
	return p
}

// Close stops the pump. Replicas still on it are left to raft's backstop.
func (p *HeartbeatPump) Close() {
	close(p.quit)
	<-p.done
}

// add puts r on the pump; remove takes it off (r is closing).
func (p *HeartbeatPump) add(r *Replica) {
	p.mu.Lock()
	if _, ok := p.groups[r]; !ok {
		p.groups[r] = &pumpGroup{r: r, added: time.Now()}
	}
	p.mu.Unlock()
}

func (p *HeartbeatPump) remove(r *Replica) {
	p.mu.Lock()
	delete(p.groups, r)
	p.mu.Unlock()
}

// The pump ticks every quarter of the configured heartbeat timeout. Each
// tick it looks at the groups added lately (new or reopened groups elect
// soon); every fullTicks, and every tick while the node of a leader it
// follows does not answer or a group is about to stand for election, at
// every group; every beatTicks it heartbeats the groups it leads. Looking at a thousand groups costs more than the tick does
// otherwise, so the full look is rarer than the tick.
const (
	beatTicks = BackstopScale * 2 / 5 * 4 // 2/5 of the raised heartbeat timeout
	fullTicks = 8                         // two configured heartbeat timeouts
	youngFor  = 5                         // heartbeat timeouts a group counts as added lately
)

func (p *HeartbeatPump) run() {
	defer close(p.done)
	t := time.NewTicker(p.cfg.HeartbeatTimeout / 4)
	defer t.Stop()
	var groups []*pumpGroup
	// The leaders of the groups followed here, as of the last full look,
	// and whether a group looked at then was about to stand for election.
	leaders := map[raft.ServerAddress]bool{}
	standing := false
	for tick := 0; ; tick++ {
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
		now := time.Now()
		beat := tick%beatTicks == 0
		full := tick%fullTicks == 0 || standing || p.anyDead(leaders)
		if full {
			clear(leaders)
			standing = false
		}
		for _, g := range groups {
			young := now.Sub(g.added) < youngFor*p.cfg.HeartbeatTimeout
			if !beat && !full && !young {
				continue
			}
			if g.r.raft.State() == raft.Leader {
				g.leader = ""
				if beat {
					p.heartbeat(g)
				}
				continue
			}
			if full || young {
				if addr := p.watch(g, now); addr != "" && full {
					leaders[addr] = true
				}
				standing = standing || !g.suspect.IsZero()
			}
		}
	}
}

// anyDead reports whether the node at any of addrs stopped answering.
func (p *HeartbeatPump) anyDead(addrs map[raft.ServerAddress]bool) bool {
	if p.cfg.Liveness == nil {
		return false
	}
	for a := range addrs {
		if !p.cfg.Liveness.Alive(a) {
			return true
		}
	}
	return false
}

// heartbeat sends the heartbeats of a group this node leads: to every
// other voter one heartbeat of the leader's term. Through a caching
// transport they go past its cache, batched with the other groups'
// heartbeats to the same node; a voter whose last one is still unanswered
// (its node hangs) is skipped, so it neither holds back the others nor
// piles up goroutines. Through another transport the group is asked for
// raft.VerifyLeader, which wakes all its heartbeat goroutines at once.
func (p *HeartbeatPump) heartbeat(g *pumpGroup) {
	r := g.r
	ph, ok := r.cfg.Transport.(pumpedHeartbeater)
	if !ok {
		if r.soleVoter() || !g.busy.CompareAndSwap(false, true) {
			return // no follower to heartbeat, or the last check is unanswered
		}
		go func() {
			defer g.busy.Store(false)
			_ = r.raft.VerifyLeader().Error()
		}()
		return
	}
	term, err := r.leaderTerm()
	if err != nil {
		return
	}
	others, _, err := r.otherVoters()
	if err != nil {
		return
	}
	if g.out == nil {
		g.out = make(map[raft.ServerID]*atomic.Bool)
	}
	send := others[:0]
	out := make(map[raft.ServerID]*atomic.Bool, len(others)) // read-only from here on
	for _, s := range others {
		if p.cfg.Liveness != nil {
			// Keep the followers' nodes watched: a leader cut off from
			// them is then found out (the node refuses the writes it
			// could not commit; node/forward.go leaderCutOff).
			p.cfg.Liveness.Alive(s.Address)
		}
		f := g.out[s.ID]
		if f == nil {
			f = new(atomic.Bool)
			g.out[s.ID] = f
		}
		if f.CompareAndSwap(false, true) {
			send = append(send, s)
			out[s.ID] = f
		}
	}
	r.heartbeatAll(send, term, func(id raft.ServerID, addr raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
		defer out[id].Store(false)
		return ph.PumpedHeartbeat(id, addr, req, resp)
	})
}

// HeartbeatCacheAge is how old an acknowledgement may be for the transport
// of a group on a pump to answer raft's own heartbeats from it (rpc/peer
// hbcache.go): two pump rounds, so that raft's heartbeats, every 1–2
// configured heartbeat timeouts on a pump, are answered from the last
// round's acknowledgements and only the pump's rounds reach the network.
// A leader cut off from its followers keeps its lease up to this much
// longer.
func HeartbeatCacheAge(heartbeatTimeout time.Duration) time.Duration {
	return 2 * beatTicks * heartbeatTimeout / 4
}

// watch decides whether this replica of a group it does not lead stands
// for election: its leader's node is dead, or it knows no leader. It
// returns the leader it knows ("" if none).
func (p *HeartbeatPump) watch(g *pumpGroup, now time.Time) raft.ServerAddress {
	if p.cfg.Liveness == nil {
		return ""
	}
	hb := p.cfg.HeartbeatTimeout
	addr, _ := g.r.raft.LeaderWithID()
	probe := false
	switch {
	case addr != "" && addr != g.r.cfg.LocalAddr && !p.cfg.Liveness.Alive(addr):
		// The leader's node is dead: the others still know it as their
		// leader, so they would refuse a pre-vote. Stand in rank order.
	case addr == "" && g.r.raft.State() == raft.Follower && now.Sub(g.added) >= hb/2:
		// No leader known: a new group, or this replica restarted. Stand
		// only if a pre-vote finds a quorum that knows no leader either
		// (and whose logs are not ahead), so a healthy leader this replica
		// has not heard from yet is left alone.
		probe = true
	default:
		g.leader, g.suspect = "", time.Time{}
		return addr
	}
	term := g.r.raft.CurrentTerm()
	if g.leader != addr || g.suspect.IsZero() || term != g.term {
		g.stood = !g.suspect.IsZero() && g.leader == addr && term != g.term
		g.leader, g.suspect, g.term = addr, now, term
	}
	if now.Sub(g.tried) < 2*hb || g.busy.Load() {
		return addr
	}
	// A later rank waits for the earlier ones, which must not stand at the
	// same moment: two replicas that stand in the same term each vote for
	// themselves, neither wins, and raft's candidates wait out their
	// (raised) election timeout, 10-20 heartbeat timeouts, before they try
	// again. Each node finds the leader's node dead at its own moment
	// (their pings and ticks differ by up to half a heartbeat timeout), so
	// until an earlier rank is seen to stand a replica waits a whole
	// heartbeat timeout per earlier rank. Once the term moved, one did: it
	// gets a tick per rank to win and be heard from (long enough for an
	// election's round trip, short enough not to matter when its log was
	// behind and it lost; standing at once could unseat it just after it
	// won), counted from the new term.
	rank := p.rank(g.r, addr)
	step := hb
	if g.stood {
		step = hb / 4
	}
	if rank < 0 || now.Sub(g.suspect) < time.Duration(rank)*step {
		return addr
	}
	g.tried = now
	g.busy.Store(true)
	go func() {
		defer g.busy.Store(false)
		if probe && !g.r.preVote(hb) {
			return
		}
		if !probe && !g.r.quorumLost(addr, p.cfg.Liveness, hb) {
			p.heldBack.Add(1)
			g.r.logger.Debug("not standing for election: the other voters still hear from the leader's node", "leader", string(addr))
			return
		}
		if err := g.r.campaign(); err != nil {
			g.r.logger.Warn("standing for election", "err", err)
			return
		}
		p.elections.Add(1)
		g.r.logger.Info("stood for election: leader node unreachable or no leader yet", "leader", string(addr), "rank", rank)
	}()
	return addr
}

// rank is this replica's place among the voters of its group that may
// replace leader (not leader itself, alive), in an order every replica
// computes alike: the preferred leader first (Config.PreferredLeader, read
// from the catalog every node applies), then an order that differs between
// groups, so the leaderships of a dead node spread; -1 when this replica
// is no voter. Replicas that disagree for a moment on the preferred leader
// both stand; the election's terms and log checks decide as always.
func (p *HeartbeatPump) rank(r *Replica, leader raft.ServerAddress) int {
	others, voters, err := r.otherVoters()
	if err != nil || voters == len(others) || r.cfg.LocalAddr == leader {
		return -1
	}
	type cand struct {
		id  raft.ServerID
		key uint64
	}
	key := func(id raft.ServerID) cand {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/%d/%s", r.cfg.ID.TableID, r.cfg.ID.PartitionID, r.cfg.ID.Bucket, id)
		return cand{id, h.Sum64()}
	}
	cands := []cand{key(r.cfg.LocalID)}
	for _, s := range others {
		if s.Address != leader && p.cfg.Liveness.Alive(s.Address) {
			cands = append(cands, key(s.ID))
		}
	}
	var pref raft.ServerID
	if f := r.cfg.PreferredLeader; f != nil {
		pref = f()
	}
	notPreferred := func(c cand) int {
		if c.id == pref {
			return 0
		}
		return 1
	}
	slices.SortFunc(cands, func(a, b cand) int {
		return cmp.Or(cmp.Compare(notPreferred(a), notPreferred(b)), cmp.Compare(a.key, b.key), cmp.Compare(a.id, b.id))
	})
	return slices.IndexFunc(cands, func(c cand) bool { return c.id == r.cfg.LocalID })
}

// preVote asks the other voters of the group for raft's pre-vote for the
// next term and reports whether a quorum (this replica included) grants it.
// A voter grants only while it knows no leader and its log is not ahead of
// this replica's. It waits no longer than wait for the answers.
func (r *Replica) preVote(wait time.Duration) bool {
	pv, ok := r.cfg.Transport.(raft.WithPreVote)
	if !ok {
		return false
	}
	others, voters, err := r.otherVoters()
	if err != nil || voters == len(others) {
		return false // or not a voter
	}
	req := raft.RequestPreVoteRequest{
		RPCHeader:    r.rpcHeader(),
		Term:         r.raft.CurrentTerm() + 1,
		LastLogIndex: r.raft.LastIndex(),
	}
	if req.LastLogIndex > 0 {
		var l raft.Log
		if err := r.log.GetLog(req.LastLogIndex, &l); err != nil {
			return false
		}
		req.LastLogTerm = l.Term
	}
	granted := make(chan bool, len(others))
	for _, s := range others {
		go func() {
			var resp raft.RequestPreVoteResponse
			err := pv.RequestPreVote(s.ID, s.Address, &req, &resp)
			granted <- err == nil && resp.Granted
		}()
	}
	return quorumGrants(granted, len(others), voters, wait)
}

// quorumLost reports whether a quorum of the group's voters, this replica
// included, lost the node of leader, which this node finds dead: it asks
// the nodes of the other voters (live.LostBy) and decides as quorumGrants
// does, the leader counting as a voter that disagrees. A replica whose node
// is cut off from the leader's alone, while the rest of the group still
// hears from it, thus leaves the leader be: standing would raise the term,
// which unseats the leader even when this replica cannot win (its log is
// behind), again each time it stood.
func (r *Replica) quorumLost(leader raft.ServerAddress, live Liveness, wait time.Duration) bool {
	others, voters, err := r.otherVoters()
	if err != nil || voters == len(others) {
		return false // or not a voter
	}
	agreed := make(chan bool, len(others))
	for _, s := range others {
		if s.Address == leader {
			agreed <- false
			continue
		}
		go func() { agreed <- live.LostBy(s.Address, leader) }()
	}
	return quorumGrants(agreed, len(others), voters, wait)
}

// quorumGrants counts the answers of others voters on granted, this
// replica's own vote included, and reports whether a quorum of voters
// granted. It waits for every answer, or until a quorum can no longer
// grant, but no longer than wait, and then decides by the answers it has:
// a voter cut off from the network answers only when the transport gives
// up on it, seconds later, and must not hold back an election the others
// decide (the answers still out go to granted's buffer). It does not stop
// at the first quorum of grants: the voter ranked before this replica may
// be standing right then, and its answer, a little later, is the one that
// shows it (stopping early was tried, and a new group's first election
// then once went to its second-ranked replica).
func quorumGrants(granted <-chan bool, others, voters int, wait time.Duration) bool {
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	need := voters/2 + 1
	votes, refused := 1, 0
	for votes-1+refused < others && refused <= others-need+1 {
		select {
		case ok := <-granted:
			if ok {
				votes++
			} else {
				refused++
			}
		case <-timeout.C:
			return votes >= need
		}
	}
	return votes >= need
}

// campaign makes this replica stand for election now: it sends itself
// raft's TimeoutNow, the RPC a leader sends to hand over leadership. raft
// skips the pre-vote and asks for votes marked as a transfer, which voters
// grant even while they still know a leader (they know the dead one until
// their own, raised, timeout). Terms and the log check still decide who
// wins, so this is safe whatever the liveness view; a wrong view only moves
// leadership.
func (r *Replica) campaign() error {
	req := raft.TimeoutNowRequest{RPCHeader: r.rpcHeader()}
	var resp raft.TimeoutNowResponse
	return r.cfg.Transport.TimeoutNow(r.cfg.LocalID, r.cfg.LocalAddr, &req, &resp)
}
