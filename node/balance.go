package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Leaders are spread by placement: a bucket's first replica is its
// preferred leader, and placement rotates first replicas over the nodes.
// Raft elections pick any replica, so each node hands the buckets it leads
// back to their preferred leader: the first replica, once it is active in
// the catalog (not draining), up, and a voter of the group. A draining
// node hands every leadership to the first replica that is all three
// (drain.go).
const (
	balanceInterval = 2 * time.Second
	// balanceBackoffBeats is the least time between two transfers of one
	// bucket, in heartbeat timeouts (30 s by default), so that a preferred
	// leader that keeps failing does not cause churn. In heartbeat
	// timeouts because what it waits out (a target that could not catch
	// up or win its election) scales with them.
	balanceBackoffBeats = 30
	// drainBackoff replaces the balance backoff on a draining node: moving
	// leaders off it is the point, so a failed transfer is retried soon.
	drainBackoff = balanceInterval
)

// balanceLoop runs the cluster-maintenance passes of this node: leader
// handback, bucket group membership (controller.go) and peer address
// fixes, every balanceInterval. It also starts the
// controller loop, which acts while this node leads the metadata group.
func (n *Node) balanceLoop() {
	n.goFunc(n.controllerLoop)
	moves := newLeaderMoves()
	t := time.NewTicker(balanceInterval)
	defer t.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-t.C:
		}
		n.balance(moves)
	}
}

// leaderMoves is what balanceLeaders keeps from one pass to the next,
// per bucket. Owned by the balance loop's goroutine.
type leaderMoves struct {
	last map[raftmeta.BucketID]time.Time // when a transfer was last tried
	// fails counts the transfers off a draining node that failed in a
	// row: the next one tries the next eligible replica, so one replica
	// that cannot take over (lagging, stuck) does not stall the drain.
	fails map[raftmeta.BucketID]int
	// stuck is the kind of reason why a draining node last could not
	// move the bucket's leadership, logged once per kind.
	stuck map[raftmeta.BucketID]string
	// meta is the same for the metadata group (moveMetaLeader).
	meta metaMoves
}

// metaMoves is leaderMoves' record for the metadata group.
type metaMoves struct {
	last  time.Time
	fails int
	stuck string
}

func newLeaderMoves() *leaderMoves {
	return &leaderMoves{last: map[raftmeta.BucketID]time.Time{}, fails: map[raftmeta.BucketID]int{}, stuck: map[raftmeta.BucketID]string{}}
}

// balance is one pass of balanceLoop.
func (n *Node) balance(moves *leaderMoves) {
	nodes := n.meta.Nodes()
	peerAddr := map[raftmeta.NodeID]string{}
	serverAddr := map[raft.ServerID]raft.ServerAddress{}
	state := map[raftmeta.NodeID]raftmeta.NodeState{}
	for _, m := range nodes {
		state[m.ID] = m.State
		if m.PeerAddr != "" {
			peerAddr[m.ID] = m.PeerAddr
			serverAddr[nodeServer(m.ID)] = raft.ServerAddress(m.PeerAddr)
		}
	}
	n.fixAddresses(serverAddr)
	alive := n.gossipAlive(nodes)
	n.reconcileGroups(alive, peerAddr)
	n.closeUnassigned()
	n.balanceLeaders(state, alive, moves)
	n.moveMetaLeader(state, alive, &moves.meta)
}

// leavesLeadership reports whether a node in state s hands off every
// leadership it holds: draining, or decommissioning (which drains first).
func leavesLeadership(s raftmeta.NodeState) bool {
	return s == raftmeta.NodeDraining || s == raftmeta.NodeDecommissioning
}

// gossipAlive maps catalog nodes to whether they may lead: not declared
// failed or left by gossip (a node gossip does not know counts as up).
func (n *Node) gossipAlive(nodes []raftmeta.Node) map[raftmeta.NodeID]bool {
	out := make(map[raftmeta.NodeID]bool, len(nodes))
	for _, m := range nodes {
		out[m.ID] = true
	}
	for _, mb := range n.members() {
		if mb.Status != membership.StatusAlive && mb.ID != int32(n.id) {
			out[raftmeta.NodeID(mb.ID)] = false
		}
	}
	return out
}

// preferredLeader is the bucket's first replica when it is active in the
// catalog, up, and a voter in the group's configuration servers. For a
// draining node (draining) it is a replica that is all three: the first
// one, which keeps leaders spread as placement spread them, or after
// skip failed transfers the one skip places further, round the eligible
// ones. 0 if none. A node that is not draining does not hand leadership
// to a second choice: that would be a transfer (a short write stall) for
// no gain, e.g. after every failover of a bucket whose first replica died.
func preferredLeader(a raftmeta.Assignment, state map[raftmeta.NodeID]raftmeta.NodeState, alive map[raftmeta.NodeID]bool, servers []raft.Server, draining bool, skip int) (raftmeta.NodeID, raft.ServerAddress) {
	cands := a.Replicas
	if !draining {
		cands = a.Replicas[:1]
	}
	var ids []raftmeta.NodeID
	var addrs []raft.ServerAddress
	for _, id := range cands {
		if state[id] != raftmeta.NodeActive || !alive[id] {
			continue
		}
		sid := nodeServer(id)
		if i := slices.IndexFunc(servers, func(s raft.Server) bool { return s.ID == sid && s.Suffrage == raft.Voter }); i >= 0 {
			ids, addrs = append(ids, id), append(addrs, servers[i].Address)
		}
	}
	if len(ids) == 0 {
		return 0, ""
	}
	i := skip % len(ids)
	return ids[i], addrs[i]
}

// balanceLeaders transfers the leadership of every bucket this node leads
// but does not prefer to its preferred replica, unless that bucket was
// tried within the backoff. A draining node says in its log, once per
// reason, why a bucket's leadership cannot leave it.
func (n *Node) balanceLeaders(state map[raftmeta.NodeID]raftmeta.NodeState, alive map[raftmeta.NodeID]bool, moves *leaderMoves) {
	draining := leavesLeadership(state[n.id])
	backoff := balanceBackoffBeats * n.cfg.Raft.HeartbeatTimeout.Duration
	if draining {
		backoff = drainBackoff
	} else {
		clear(moves.fails)
		clear(moves.stuck)
		moves.meta = metaMoves{}
	}
	for _, a := range n.meta.Assignments() {
		if len(a.Replicas) < 2 || !slices.Contains(a.Replicas, n.id) || time.Since(moves.last[a.BucketID]) < backoff {
			continue
		}
		r := n.replica(a.BucketID)
		if r == nil || !r.IsLeader() {
			delete(moves.fails, a.BucketID)
			delete(moves.stuck, a.BucketID)
			continue
		}
		f := r.Raft().GetConfiguration()
		if f.Error() != nil {
			continue
		}
		pref, addr := preferredLeader(a, state, alive, f.Configuration().Servers, draining, moves.fails[a.BucketID])
		if pref == n.id {
			continue
		}
		// stuck logs why, once per kind of reason (not per target and
		// error, which change as the attempts go round the replicas).
		stuck := func(kind, reason string) {
			if draining && moves.stuck[a.BucketID] != kind {
				moves.stuck[a.BucketID] = kind
				n.logger.Warn("drain: bucket leadership cannot leave this node yet", "table", a.TableID, "bucket", a.Bucket, "reason", reason)
			}
		}
		if pref == 0 {
			stuck("none", "no other replica is active, up and a voter of the group")
			continue
		}
		// A draining node pings a target it never asked about at once
		// (a leader may not have pinged its followers' nodes): waiting
		// for the next round of pings would count it as not answering.
		answering := n.live.Answering
		if draining {
			answering = n.live.AnsweringNow
		}
		if !answering(addr) {
			if draining {
				moves.fails[a.BucketID]++
			}
			stuck("silent", fmt.Sprintf("the replica on node %d does not answer", pref))
			continue
		}
		moves.last[a.BucketID] = time.Now()
		select {
		case <-n.quit:
			return
		default:
		}
		if err := r.Raft().LeadershipTransferToServer(nodeServer(pref), addr).Error(); err != nil {
			if draining {
				moves.fails[a.BucketID]++
				stuck("failed", fmt.Sprintf("transfer to node %d failed: %v", pref, err))
			}
			n.logger.Debug("leadership transfer to the preferred replica", "table", a.TableID, "bucket", a.Bucket, "to", int32(pref), "err", err)
			continue
		}
		delete(moves.fails, a.BucketID)
		delete(moves.stuck, a.BucketID)
		n.logger.Debug("bucket leadership handed to its preferred replica", "table", a.TableID, "bucket", a.Bucket, "to", int32(pref))
	}
}

// moveMetaLeader hands the metadata group's leadership off a draining
// node, as balanceLeaders does a bucket's: to a voter of the group that is
// active, up and answers, the next one round them after a failed
// transfer. A drained node then leads no group at all, and its stop has
// nothing left to hand off. If no voter qualifies (every other one is
// draining or down) the leadership stays, and the node says so once.
func (n *Node) moveMetaLeader(state map[raftmeta.NodeID]raftmeta.NodeState, alive map[raftmeta.NodeID]bool, moves *metaMoves) {
	if !leavesLeadership(state[n.id]) || !n.meta.IsLeader() || time.Since(moves.last) < drainBackoff {
		return
	}
	servers, err := n.meta.Servers()
	if err != nil {
		return
	}
	stuck := func(kind, reason string) {
		if moves.stuck != kind {
			moves.stuck = kind
			n.logger.Warn("drain: metadata leadership cannot leave this node yet", "reason", reason)
		}
	}
	a := raftmeta.Assignment{Replicas: serverNodes(servers)}
	to, addr := preferredLeader(a, state, alive, servers, true, moves.fails)
	switch {
	case to == 0:
		stuck("none", "no other voter of the metadata group is active and up")
		return
	case !n.live.AnsweringNow(addr):
		moves.fails++
		stuck("silent", fmt.Sprintf("node %d does not answer", to))
		return
	}
	moves.last = time.Now()
	if err := n.meta.Raft().LeadershipTransferToServer(nodeServer(to), addr).Error(); err != nil {
		moves.fails++
		stuck("failed", fmt.Sprintf("transfer to node %d failed: %v", to, err))
		return
	}
	*moves = metaMoves{}
	n.logger.Info("drain: metadata leadership handed to another node", "to", int32(to))
}

// serverNodes is the node ids of a group's servers, in their order.
func serverNodes(servers []raft.Server) []raftmeta.NodeID {
	ids := make([]raftmeta.NodeID, 0, len(servers))
	for _, s := range servers {
		ids = append(ids, serverNode(s.ID))
	}
	return ids
}

// fixAddresses updates, in every bucket group this node leads, the address
// of a member whose node registered another peer address (it restarted
// elsewhere): the group could not reach it otherwise.
func (n *Node) fixAddresses(peerAddr map[raft.ServerID]raft.ServerAddress) {
	n.mu.Lock()
	reps := make([]*replica.Replica, 0, len(n.replicas))
	for _, r := range n.replicas {
		reps = append(reps, r)
	}
	n.mu.Unlock()
	for _, r := range reps {
		if !r.IsLeader() {
			continue
		}
		f := r.Raft().GetConfiguration()
		if f.Error() != nil {
			continue
		}
		for _, s := range f.Configuration().Servers {
			addr, ok := peerAddr[s.ID]
			if !ok || addr == s.Address {
				continue
			}
			var fut raft.IndexFuture
			if s.Suffrage == raft.Voter {
				fut = r.Raft().AddVoter(s.ID, addr, 0, 5*time.Second)
			} else {
				fut = r.Raft().AddNonvoter(s.ID, addr, 0, 5*time.Second)
			}
			if err := fut.Error(); err != nil {
				n.logger.Warn("update a bucket replica's peer address", "server", s.ID, "addr", addr, "err", err)
				continue
			}
			n.logger.Info("bucket replica peer address updated", "server", s.ID, "old", s.Address, "addr", addr)
		}
	}
}
