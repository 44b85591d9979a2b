package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// The controller (DESIGN §4) runs on the metadata leader only. It writes
// the desired state; nodes and bucket-group leaders converge to it:
//
//   - controllerLoop: a node down (gossip: failed or left, or unknown to
//     gossip and not answering node.hello) for longer than
//     cluster.dead_node_grace gets its replicas replaced by live active
//     nodes (raftmeta.ReplaceDown: spread evenly, never two replicas on one
//     node, only buckets whose live replicas are a majority or whose group
//     has a leader anyway, after recovery: ledAnyway, recover.go).
//   - controllerLoop also gives a bucket with fewer replicas than its
//     table's replication factor (placed while fewer nodes were active)
//     the missing ones on the active nodes holding the fewest replicas
//     (raftmeta.Grow), once none of its replicas is down.
//   - controllerLoop also spreads the preferred leaders (first replicas)
//     evenly over the nodes once the cluster is settled (spreadLeaders).
//   - controllerLoop also keeps the partitions of auto-partitioned tables
//     (autoPartitioner): the ones due ahead exist, the ones past retention
//     are dropped.
//   - reconcileGroups (every node, for the buckets it leads): the bucket
//     group's Raft configuration converges to the assignment: a missing
//     replica is added as a non-voter, promoted to voter once it caught up
//     (bucket.progress), and a server no longer assigned is removed at once
//     when it is down, else once every assigned replica is a voter.
//   - A replica opened at an assignment epoch > 0 does not bootstrap
//     (bootConfig): it waits for its group's leader to add it.
//   - A replica that moved away keeps serving its group until the group's
//     leader has committed a configuration without it (retired, asked with
//     bucket.member); while it leads, it adds the new replicas and, once
//     every assigned replica votes, hands leadership to one of them, which
//     removes it. So a bucket of one or two replicas moves without ever
//     having fewer voting copies than assigned.
const (
	controllerInterval = time.Second
	// callBucketProgress asks a node how far its replica of a bucket got
	// (request: bucket id; reply: the replica's last Raft index).
	callBucketProgress = "bucket.progress"
	// callBucketMember asks a node whether its replica of a bucket leads a
	// group whose committed configuration holds a server (request: bucket
	// id, node id; reply: one byte, memberUnknown/memberYes/memberNo).
	callBucketMember = "bucket.member"
	// memberChangeTimeout bounds one AddVoter/AddNonvoter/RemoveServer.
	memberChangeTimeout = 5 * time.Second
)

// controllerState is what the controller keeps from one pass to the
// next. It restarts empty on a new leader, so a leader change never
// shortens the grace period.
type controllerState struct {
	// downSince is when this controller first saw each node down (or
	// gossip's DeadSince, if earlier).
	downSince map[raftmeta.NodeID]time.Time
	// stuckOff is the buckets of decommissioning nodes that the last pass
	// found no node to move to (logged when it changes).
	stuckOff []raftmeta.BucketID
	// ledAsked is when ledAnyway last asked about each bucket.
	ledAsked map[raftmeta.BucketID]time.Time
}

// controllerLoop runs on every node and acts while it leads the metadata
// group.
func (n *Node) controllerLoop() {
	cs := &controllerState{downSince: map[raftmeta.NodeID]time.Time{}, ledAsked: map[raftmeta.BucketID]time.Time{}}
	parts := &autoPartitioner{n: n, errs: map[int64]string{}}
	t := time.NewTicker(controllerInterval)
	defer t.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-t.C:
		}
		if !n.meta.IsLeader() || !n.gossipStarted() {
			clear(cs.downSince)
			cs.stuckOff = nil
			continue
		}
		select {
		case <-n.registered:
		default:
			continue
		}
		n.replaceDeadReplicas(cs, time.Now())
		now := time.Now()
		if n.autoPartitionNow != nil {
			now = n.autoPartitionNow()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		parts.pass(ctx, now)
		cancel()
	}
}

// aliveNodes maps catalog node ids to whether they are up: this node
// always; a node gossip knows, by its gossip status; a node gossip does
// not know (never joined, or stopped before this process started, such
// as a decommissioned node), by whether it answers node.hello within a
// second. The hellos go out together, so that a catalog holding many
// stopped nodes does not slow each controller pass by a second apiece.
func (n *Node) aliveNodes(ctx context.Context, nodes []raftmeta.Node) map[raftmeta.NodeID]bool {
	status := map[raftmeta.NodeID]membership.Status{}
	for _, mb := range n.members() {
		status[raftmeta.NodeID(mb.ID)] = mb.Status
	}
	out := make(map[raftmeta.NodeID]bool, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range nodes {
		st, known := status[m.ID]
		switch {
		case m.ID == n.id:
			out[m.ID] = true
		case n.fenced(nodeServer(m.ID)):
			// members() leaves it out; without this it would be asked
			// node.hello below, and it may well answer.
			out[m.ID] = false
		case known:
			out[m.ID] = st == membership.StatusAlive
		case m.PeerAddr != "":
			wg.Go(func() {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := n.peers.Call(cctx, m.PeerAddr, callHello, nil)
				cancel()
				mu.Lock()
				out[m.ID] = err == nil
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return out
}

// replaceDeadReplicas is one controller pass: it updates cs.downSince,
// moves the replicas of nodes down for longer than the grace period and
// of decommissioning nodes, fixes the metadata group's membership, and
// adds the replicas buckets lack to reach their replication factor.
func (n *Node) replaceDeadReplicas(cs *controllerState, now time.Time) {
	downSince := cs.downSince
	nodes := n.meta.Nodes()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alive := n.aliveNodes(ctx, nodes)
	gossipDead := n.DeadSince()
	grace := n.clusterConfig().DeadNodeGrace
	for _, m := range nodes {
		if alive[m.ID] {
			delete(downSince, m.ID)
			continue
		}
		if _, ok := downSince[m.ID]; !ok {
			t := now
			if d, ok := gossipDead[m.ID]; ok && d.Before(now) {
				t = d
			}
			downSince[m.ID] = t
			n.logger.Info("controller: node is down", "id", int32(m.ID), "grace", grace)
		}
	}
	// A fenced node (given up by recover: fence.go) will not come back:
	// its grace has passed already.
	expired := func(id raftmeta.NodeID) bool {
		t, ok := downSince[id]
		return ok && now.Sub(t) >= grace || n.fenced(nodeServer(id))
	}
	// A node down past the grace period is marked left in the catalog, so
	// that new tables are not placed on it; it registers as active again
	// when it comes back.
	for _, m := range nodes {
		if m.State == raftmeta.NodeActive && expired(m.ID) {
			if err := n.meta.SetNodeState(ctx, m.ID, raftmeta.NodeLeft); err != nil {
				n.logger.Warn("controller: mark a dead node left", "id", int32(m.ID), "err", err)
			} else {
				n.logger.Info("controller: node marked left (down past the grace period)", "id", int32(m.ID))
			}
		}
	}
	var targets []raftmeta.NodeID
	state := map[raftmeta.NodeID]raftmeta.NodeState{}
	for _, m := range nodes {
		state[m.ID] = m.State
		if m.State == raftmeta.NodeActive && alive[m.ID] {
			targets = append(targets, m.ID)
		}
	}
	n.fixMetaMembers(ctx, nodes, state, alive, expired)
	n.forgetDecommissioned(ctx, nodes, expired)
	if changes := raftmeta.ReplaceDown(n.meta.Assignments(), expired, n.ledAnyway(cs, alive), targets); len(changes) > 0 {
		if !n.setAssignments(ctx, changes, "moved off dead nodes") {
			return
		}
	}
	leaving := func(id raftmeta.NodeID) bool { return state[id] == raftmeta.NodeDecommissioning }
	down := func(id raftmeta.NodeID) bool { return !alive[id] }
	changes, stuck := raftmeta.MoveOff(n.meta.Assignments(), leaving, down, targets)
	if len(stuck) > 0 && !slices.Equal(stuck, cs.stuckOff) {
		n.logger.Warn("controller: replicas of a decommissioning node have no active node to move to; add a node", "buckets", len(stuck), "first", stuck[0].String())
	}
	cs.stuckOff = stuck
	if len(changes) > 0 && !n.setAssignments(ctx, changes, "moved off decommissioning nodes") {
		return
	}
	// Buckets placed while fewer nodes were active than their table's
	// replication factor get the missing replicas once the nodes are there.
	if changes := raftmeta.Grow(n.meta.Assignments(), n.meta.ReplicationFactor, down, targets); len(changes) > 0 {
		n.setAssignments(ctx, changes, "added up to the replication factor")
		return
	}
	// Buckets of a table whose factor was lowered (AlterTable) lose their
	// surplus replicas; each group removes them as for a move.
	if changes := raftmeta.Shrink(n.meta.Assignments(), n.meta.ExplicitReplicationFactor, down); len(changes) > 0 {
		n.setAssignments(ctx, changes, "removed down to the replication factor")
		return
	}
	n.spreadLeaders(ctx, nodes, targets)
}

// fixMetaMembers makes one change to the metadata group's membership per
// controller pass, as Consul's autopilot cleans up dead servers:
//
//   - A node down past the grace period leaves the group. A voter that
//     will not come back still counts toward the group's size: the group
//     keeps one failure less in reserve than its voters suggest, and a
//     replacement is never promoted (promote fills the group only up to
//     meta_voters voters). Removing a dead voter costs no quorum: the
//     leader commits the removal with a majority of the old configuration,
//     which it has while it leads, and the node removed is not in it.
//   - A decommissioning node leaves the group once no assignment names it
//     and it reports no open replica (its last moved replicas are closed,
//     which it learns from its own catalog copy, fed by the group). Not
//     this node: a decommissioning leader hands the leadership off first
//     (moveMetaLeader), and the next leader removes it.
//   - A group with more voters than meta_voters (decommissioning voters,
//     about to leave, not counted) has one demoted to a non-voter: one
//     that is down first, else the one with the highest id. A
//     decommission undone after its vote passed to a non-voter leaves
//     such a surplus, and so does lowering meta_voters; a group of four
//     voters survives no more failures than one of three, and waits for
//     more of them on every commit.
//   - A node that is up but not in the group (it came back after its
//     removal, or was removed while only gossip lost it) is added back as
//     a non-voter, at its catalog peer address: it is not sent the group's
//     entries otherwise, and could not even register (it learns of no
//     leader). promote makes it a voter if the group has room. Not a
//     decommissioning node.
//   - A node that is up, in the group and marked left is marked active: a
//     node that comes back by restarting registers so itself, but one that
//     was only cut off for longer than the grace period never restarted,
//     and would otherwise get no replicas and no vote until it did.
func (n *Node) fixMetaMembers(ctx context.Context, nodes []raftmeta.Node, state map[raftmeta.NodeID]raftmeta.NodeState, alive map[raftmeta.NodeID]bool, expired func(raftmeta.NodeID) bool) {
	servers, err := n.meta.Servers()
	if err != nil {
		return
	}
	in := map[raftmeta.NodeID]bool{}
	for _, s := range servers {
		in[serverNode(s.ID)] = true
	}
	for _, s := range servers {
		id := serverNode(s.ID)
		if id == n.id {
			continue
		}
		why := "dead"
		switch {
		case expired(id):
		case state[id] == raftmeta.NodeDecommissioning && n.holdsNothing(ctx, id):
			why = "decommissioned"
		default:
			continue
		}
		if err := n.meta.RemoveServer(ctx, id); err != nil {
			n.logger.Warn("controller: remove a node from the metadata group", "id", int32(id), "why", why, "err", err)
			return
		}
		n.logger.Info("controller: node removed from the metadata group", "id", int32(id), "why", why, "voter", s.Suffrage == raft.Voter)
		return
	}
	target := n.clusterConfig().MetaVoters
	if id, ok := surplusVoter(servers, state, alive, n.id, target); ok {
		if err := n.meta.DemoteVoter(ctx, id); err != nil {
			n.logger.Warn("controller: demote a metadata voter beyond meta_voters", "id", int32(id), "err", err)
			return
		}
		n.logger.Info("controller: metadata voter demoted to non-voter (the group had more than meta_voters voters)", "id", int32(id), "alive", alive[id], "meta_voters", target)
		return
	}
	for _, m := range nodes {
		if in[m.ID] || !alive[m.ID] || m.PeerAddr == "" || m.State == raftmeta.NodeDecommissioning {
			continue
		}
		if err := n.meta.AddNonvoter(ctx, m.ID, raft.ServerAddress(m.PeerAddr)); err != nil {
			n.logger.Warn("controller: add a returned node back to the metadata group", "id", int32(m.ID), "err", err)
			return
		}
		n.logger.Info("controller: returned node added back to the metadata group as a non-voter", "id", int32(m.ID))
		return
	}
	for _, m := range nodes {
		if m.State != raftmeta.NodeLeft || !in[m.ID] || !alive[m.ID] {
			continue
		}
		if err := n.meta.SetNodeState(ctx, m.ID, raftmeta.NodeActive); err != nil {
			n.logger.Warn("controller: mark a returned node active", "id", int32(m.ID), "err", err)
			return
		}
		n.logger.Info("controller: node marked active again (up after it was marked left)", "id", int32(m.ID))
		return
	}
}

// forgetDecommissioned removes from the catalog one node per pass whose
// decommission finished (no assignment names it, it is out of the metadata
// group) and that has been down for the grace period since: stopped for
// good, it would otherwise stay listed, as decommissioned, forever. Until
// then `cluster undrain` can take it back.
func (n *Node) forgetDecommissioned(ctx context.Context, nodes []raftmeta.Node, expired func(raftmeta.NodeID) bool) {
	if n.clusterFeatureLevel() < featureForget {
		return
	}
	servers, err := n.meta.Servers()
	if err != nil {
		return
	}
	held := map[raftmeta.NodeID]bool{}
	for _, s := range servers {
		held[serverNode(s.ID)] = true
	}
	for _, a := range n.meta.Assignments() {
		for _, id := range a.Replicas {
			held[id] = true
		}
	}
	for _, m := range nodes {
		if m.State != raftmeta.NodeDecommissioning || held[m.ID] || !expired(m.ID) {
			continue
		}
		if err := n.meta.ForgetNode(ctx, m.ID); err != nil {
			n.logger.Warn("controller: forget a decommissioned node", "id", int32(m.ID), "err", err)
			return
		}
		n.logger.Info("controller: decommissioned node forgotten (down past the grace period)", "id", int32(m.ID))
		return
	}
}

// surplusVoter picks the voter fixMetaMembers demotes when the group has
// more than want voters, not counting decommissioning ones: never self
// (the leader), a down voter before a live one, then the highest id.
func surplusVoter(servers []raft.Server, state map[raftmeta.NodeID]raftmeta.NodeState, alive map[raftmeta.NodeID]bool, self raftmeta.NodeID, want int) (raftmeta.NodeID, bool) {
	var voters []raftmeta.NodeID
	for _, s := range servers {
		if id := serverNode(s.ID); s.Suffrage == raft.Voter && state[id] != raftmeta.NodeDecommissioning {
			voters = append(voters, id)
		}
	}
	if len(voters) <= want {
		return 0, false
	}
	var pick raftmeta.NodeID
	for _, id := range voters {
		switch {
		case id == self:
		case pick == 0, alive[pick] && !alive[id], alive[pick] == alive[id] && id > pick:
			pick = id
		}
	}
	return pick, pick != 0
}

// holdsNothing reports whether no assignment names node id and the node
// reports no open replica (false when it does not answer).
func (n *Node) holdsNothing(ctx context.Context, id raftmeta.NodeID) bool {
	for _, a := range n.meta.Assignments() {
		if slices.Contains(a.Replicas, id) {
			return false
		}
	}
	st, ok := n.statsOf(ctx, []raftmeta.NodeID{id}, false)[id]
	return ok && st.Replicas == 0
}

// spreadLeaders makes the preferred leaders even over the nodes (at most
// one apart; raftmeta.SpreadLeaders), as Redpanda's leader balancer does:
// buckets grown from one node to their replication factor, or left after
// tables were dropped, would otherwise keep their leaders where they were
// until `cluster rebalance`. The balance loop's handback then moves each
// leadership. It acts only on a settled cluster: every node that holds a
// replica active and up, none draining or decommissioning (drains and
// failovers move leaders on purpose).
func (n *Node) spreadLeaders(ctx context.Context, nodes []raftmeta.Node, targets []raftmeta.NodeID) {
	for _, m := range nodes {
		if m.State == raftmeta.NodeDraining || m.State == raftmeta.NodeDecommissioning {
			return
		}
	}
	as := n.meta.Assignments()
	for _, a := range as {
		for _, r := range a.Replicas {
			if !slices.Contains(targets, r) {
				return
			}
		}
	}
	if changes := raftmeta.SpreadLeaders(as, targets); len(changes) > 0 {
		n.setAssignments(ctx, changes, "reordered to spread the preferred leaders")
	}
}

// setAssignments writes the controller's changes to the catalog and logs
// each bucket's new replicas ("bucket replicas <what>"); false on failure.
func (n *Node) setAssignments(ctx context.Context, changes []raftmeta.Assignment, what string) bool {
	if err := n.meta.SetAssignments(ctx, changes); err != nil {
		n.logger.Warn("controller: bucket replicas not "+what, "buckets", len(changes), "err", err)
		return false
	}
	for _, a := range changes {
		n.logger.Info("controller: bucket replicas "+what, "table", a.TableID, "partition", a.PartitionID, "bucket", a.Bucket, "replicas", a.Replicas)
	}
	return true
}

// reconcileGroups makes the Raft configuration of every bucket group this
// node leads converge to the bucket's assignment. alive is the liveness of
// catalog nodes, peerAddr their peer addresses.
func (n *Node) reconcileGroups(alive map[raftmeta.NodeID]bool, peerAddr map[raftmeta.NodeID]string) {
	for _, a := range n.meta.Assignments() {
		r := n.replica(a.BucketID) // assigned here, or moved away and not yet retired
		if r == nil || !r.IsLeader() {
			continue
		}
		select {
		case <-n.quit:
			return
		default:
		}
		n.reconcileGroup(r, a, alive, peerAddr)
	}
}

// serverNode is the node of a raft server id (0 if it names none).
func serverNode(id raft.ServerID) raftmeta.NodeID { return parseNodeID(string(id)) }

func nodeServer(id raftmeta.NodeID) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

// reconcileGroup runs one step per server that differs; the next pass
// (balanceInterval) continues. Failures are logged and retried.
func (n *Node) reconcileGroup(r *replica.Replica, a raftmeta.Assignment, alive map[raftmeta.NodeID]bool, peerAddr map[raftmeta.NodeID]string) {
	f := r.Raft().GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	in := map[raftmeta.NodeID]raft.Server{}
	for _, s := range servers {
		in[serverNode(s.ID)] = s
	}
	log := n.logger.With("table", a.TableID, "partition", a.PartitionID, "bucket", a.Bucket)
	allVoters := true
	for _, id := range a.Replicas {
		s, ok := in[id]
		switch {
		case !ok:
			allVoters = false
			addr := peerAddr[id]
			if addr == "" || n.fenced(nodeServer(id)) {
				continue
			}
			if err := r.Raft().AddNonvoter(nodeServer(id), raft.ServerAddress(addr), 0, memberChangeTimeout).Error(); err != nil {
				log.Warn("add a new replica to the bucket group", "node", int32(id), "err", err)
				continue
			}
			log.Info("new replica added to the bucket group as a non-voter", "node", int32(id))
		case s.Suffrage != raft.Voter:
			allVoters = false
			if !n.caughtUp(r, a.BucketID, s) {
				continue
			}
			if err := r.Raft().AddVoter(s.ID, s.Address, 0, memberChangeTimeout).Error(); err != nil {
				log.Warn("promote a caught-up replica to voter", "node", int32(id), "err", err)
				continue
			}
			log.Info("replica caught up: promoted to voter", "node", int32(id))
		}
	}
	for id, s := range in {
		if slices.Contains(a.Replicas, id) || id == n.id {
			continue
		}
		// A live replica leaves only once its replacement votes, so the
		// group never has fewer voting copies than assigned; a down one
		// leaves at once (it shrinks the quorum the group needs).
		if alive[id] && !allVoters {
			continue
		}
		if err := r.Raft().RemoveServer(s.ID, 0, memberChangeTimeout).Error(); err != nil {
			log.Warn("remove an unassigned replica from the bucket group", "node", int32(id), "err", err)
			continue
		}
		log.Info("replica no longer assigned: removed from the bucket group", "node", int32(id), "was_alive", alive[id])
	}
	if !slices.Contains(a.Replicas, n.id) && allVoters {
		// Moved away and every assigned replica votes: hand over to the
		// first live one (the preferred leader first); it removes this
		// replica.
		for _, id := range a.Replicas {
			to := in[id]
			if !alive[id] || !n.live.Answering(to.Address) {
				continue
			}
			if err := r.Raft().LeadershipTransferToServer(to.ID, to.Address).Error(); err != nil {
				log.Warn("hand the bucket group over to an assigned replica", "node", int32(id), "err", err)
				return
			}
			log.Info("replica moved away: leadership handed over", "node", int32(id))
			return
		}
	}
}

// ledAskEvery is how often ledAnyway asks about one bucket: a bucket that
// lost its majority and was not recovered is asked about on every pass
// otherwise.
const ledAskEvery = 10 * time.Second

// ledAnyway is ReplaceDown's led: whether the group of a bucket whose
// replicas are mostly down has a leader all the same, as one has once
// recovery made its survivor the only voter (recover.go). It asks the
// nodes of the bucket's live replicas (bucket.member: any answer but
// memberUnknown comes from a leader with a committed configuration), at
// most once per ledAskEvery for each bucket.
func (n *Node) ledAnyway(cs *controllerState, alive map[raftmeta.NodeID]bool) func(raftmeta.Assignment) bool {
	for b, t := range cs.ledAsked {
		if time.Since(t) >= ledAskEvery {
			delete(cs.ledAsked, b) // asked again if still to ask; a dropped bucket's goes
		}
	}
	return func(a raftmeta.Assignment) bool {
		if _, ok := cs.ledAsked[a.BucketID]; ok {
			return false
		}
		cs.ledAsked[a.BucketID] = time.Now()
		var addrs []string
		for _, id := range a.Replicas {
			if addr, ok := n.nodePeerAddr(id); ok && alive[id] {
				addrs = append(addrs, addr)
			}
		}
		if n.memberAnswer(a.BucketID, addrs) == memberUnknown {
			return false
		}
		delete(cs.ledAsked, a.BucketID)
		return true
	}
}

// Answers of bucket.member.
const (
	memberUnknown byte = iota // not the leader, or its configuration is not committed yet
	memberYes
	memberNo
)

// retired reports whether this node's replica r of bucket a (assigned
// elsewhere now) may close: a leader of its group has committed a
// configuration without this node. It asks the leader r knows, then the
// nodes of the assignment. A replica that leads is never retired: it hands
// over first (reconcileGroup).
func (n *Node) retired(r *replica.Replica, a raftmeta.Assignment) bool {
	if r.IsLeader() {
		return false
	}
	var addrs []string
	if addr, _ := r.Raft().LeaderWithID(); addr != "" {
		addrs = append(addrs, string(addr))
	}
	for _, id := range a.Replicas {
		if addr, ok := n.nodePeerAddr(id); ok && !slices.Contains(addrs, addr) {
			addrs = append(addrs, addr)
		}
	}
	return n.memberAnswer(a.BucketID, addrs) == memberNo
}

// memberAnswer asks the nodes at addrs in turn whether their replica of b
// leads a group whose committed configuration holds this node
// (bucket.member), and returns the first answer from a leader:
// memberUnknown when none leads.
func (n *Node) memberAnswer(b raftmeta.BucketID, addrs []string) byte {
	req := appendUvarint(appendBucketID(nil, b), uint64(n.id))
	for _, addr := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := n.peers.Call(ctx, addr, callBucketMember, req)
		cancel()
		if err == nil && len(resp) == 1 && resp[0] != memberUnknown {
			return resp[0]
		}
	}
	return memberUnknown
}

// handleBucketMember answers bucket.member (callBucketMember).
func (n *Node) handleBucketMember(_ context.Context, req []byte) ([]byte, error) {
	rd := &reader{b: req}
	b := rd.bucketID()
	id := raftmeta.NodeID(rd.uvarint("node id"))
	if err := rd.done(); err != nil {
		return nil, err
	}
	r := n.replica(b)
	if r == nil || !r.IsLeader() {
		return []byte{memberUnknown}, nil
	}
	f := r.Raft().GetConfiguration()
	if f.Error() != nil || f.Index() > r.Raft().CommitIndex() {
		return []byte{memberUnknown}, nil
	}
	for _, s := range f.Configuration().Servers {
		if serverNode(s.ID) == id {
			return []byte{memberYes}, nil
		}
	}
	return []byte{memberNo}, nil
}

// caughtUp asks the node of server s how far its replica of b got: caught
// up when its last Raft index reached what this leader had applied before
// asking.
func (n *Node) caughtUp(r *replica.Replica, b raftmeta.BucketID, s raft.Server) bool {
	target := r.Raft().AppliedIndex()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := n.peers.Call(ctx, string(s.Address), callBucketProgress, appendBucketID(nil, b))
	if err != nil {
		return false
	}
	last, err := decodeProgress(resp)
	return err == nil && last >= target
}

// handleBucketProgress answers bucket.progress: the last Raft index of
// this node's replica of the bucket.
func (n *Node) handleBucketProgress(_ context.Context, req []byte) ([]byte, error) {
	b, err := decodeProgressReq(req)
	if err != nil {
		return nil, err
	}
	r := n.replica(b)
	if r == nil {
		return nil, fmt.Errorf("%v: no replica on node %d", b, n.nodeID())
	}
	return appendUvarint(nil, r.Raft().LastIndex()), nil
}

// decodeProgressReq decodes a bucket.progress request (a bucket id).
func decodeProgressReq(b []byte) (raftmeta.BucketID, error) {
	rd := &reader{b: b}
	id := rd.bucketID()
	return id, rd.done()
}

// decodeProgress decodes a bucket.progress reply (one uvarint).
func decodeProgress(b []byte) (uint64, error) {
	rd := &reader{b: b}
	v := rd.uvarint("last index")
	return v, rd.done()
}

// rebalance runs on the metadata leader: it writes assignments that spread
// replicas and preferred leaders evenly over the active, up nodes
// (raftmeta.Rebalance) and returns how many replicas move. The bucket
// groups' leaders then add each new replica, wait until it caught up,
// promote it and remove the old one (reconcileGroup); leaders follow
// through the balance loop's handback.
func (n *Node) rebalance(ctx context.Context) (int, error) {
	nodes := n.meta.Nodes()
	alive := n.aliveNodes(ctx, nodes)
	var ids []raftmeta.NodeID
	for _, m := range nodes {
		if m.State == raftmeta.NodeActive && alive[m.ID] {
			ids = append(ids, m.ID)
		}
	}
	old := map[raftmeta.BucketID][]raftmeta.NodeID{}
	as := n.meta.Assignments()
	for _, a := range as {
		old[a.BucketID] = a.Replicas
	}
	changes := raftmeta.Rebalance(as, ids)
	if len(changes) == 0 {
		return 0, nil
	}
	moved := 0
	for _, a := range changes {
		for _, r := range a.Replicas {
			if !slices.Contains(old[a.BucketID], r) {
				moved++
			}
		}
	}
	if err := n.meta.SetAssignments(ctx, changes); err != nil {
		return 0, fmt.Errorf("rebalance %d buckets: %w", len(changes), err)
	}
	n.logger.Info("rebalance: assignments written", "buckets", len(changes), "replicas_moved", moved, "nodes", len(ids))
	return moved, nil
}
