package node

import (
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/raftmeta"
)

// A graceful stop (SIGTERM, Close) hands the leadership of every group
// this node leads, the bucket groups and the metadata group, to another
// voter before the groups shut down, as Kafka's controlled shutdown does:
// their writes then wait for a transfer (milliseconds) instead of the
// other replicas' failure detection and an election (a heartbeat timeout
// and more). It runs after the node has left gossip, so that no other
// node's balance loop hands a leadership back to it meanwhile. A group
// whose transfer fails or does not finish within handoffTimeout fails
// over by election, as after a crash. A drained node leads no group (not
// even the metadata group, unless no other voter of it is active), so its
// stop has nothing to hand off.
const (
	handoffTimeout = 5 * time.Second
	// handoffParallel bounds the transfers in flight at once: each costs
	// the target an election, and thousands at once would only queue.
	handoffParallel = 32
)

// handOffLeadership transfers the leadership of the groups this node
// leads to other voters that answer, and waits for the transfers until
// handoffTimeout. It returns a function that waits for the transfers
// still running (they end when their group shuts down), to be called
// after the replicas are closed.
func (n *Node) handOffLeadership() (wait func()) {
	var wg sync.WaitGroup
	if n.meta == nil || n.live == nil {
		return wg.Wait
	}
	deadline := time.Now().Add(handoffTimeout)
	nodes := n.meta.Nodes()
	state := map[raftmeta.NodeID]raftmeta.NodeState{}
	for _, m := range nodes {
		state[m.ID] = m.State
	}
	state[n.id] = raftmeta.NodeDraining // never a target of its own transfers
	alive := n.gossipAlive(nodes)
	moved, failed := 0, 0
	var mu sync.Mutex
	sem := make(chan struct{}, handoffParallel)
	// transfer hands r's group to the target handoffTarget picks among
	// servers, in the order given (nil: the servers').
	transfer := func(what []any, r *raft.Raft, order []raftmeta.NodeID, servers []raft.Server) {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if time.Now().After(deadline) {
				return
			}
			id, addr := n.handoffTarget(order, state, alive, servers)
			if id == 0 {
				return
			}
			err := r.LeadershipTransferToServer(nodeServer(id), addr).Error()
			// A transfer the balance loop started before the stop may
			// still be out: wait for it, and try again if it failed.
			for errors.Is(err, raft.ErrLeadershipTransferInProgress) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				if r.State() != raft.Leader {
					return
				}
				err = r.LeadershipTransferToServer(nodeServer(id), addr).Error()
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				n.logger.Debug("shutdown: leadership transfer failed; the group elects a leader instead", append(what, "to", int32(id), "err", err)...)
				return
			}
			moved++
		})
	}
	if n.meta.IsLeader() {
		if servers, err := n.meta.Servers(); err == nil {
			transfer([]any{"group", "meta"}, n.meta.Raft(), nil, servers)
		}
	}
	for _, a := range n.meta.Assignments() {
		r := n.replica(a.BucketID)
		if r == nil || !r.IsLeader() || len(a.Replicas) < 2 {
			continue
		}
		f := r.Raft().GetConfiguration()
		if f.Error() != nil {
			continue
		}
		transfer([]any{"table", a.TableID, "partition", a.PartitionID, "bucket", a.Bucket}, r.Raft(), a.Replicas, f.Configuration().Servers)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
	}
	mu.Lock()
	if moved+failed > 0 {
		n.logger.Info("shutdown: leaderships handed to other replicas", "moved", moved, "failed", failed)
	}
	mu.Unlock()
	return wg.Wait
}

// handoffTarget is the voter a stopping node hands a group to: the first
// of order (a bucket's replicas; nil: the servers' order) that is active,
// up and a voter, else any other voter that is up (draining, say), as long
// as it answers a ping (AnsweringNow: a leader of every group it shares
// with a peer may never have pinged it). 0 if none.
func (n *Node) handoffTarget(order []raftmeta.NodeID, state map[raftmeta.NodeID]raftmeta.NodeState, alive map[raftmeta.NodeID]bool, servers []raft.Server) (raftmeta.NodeID, raft.ServerAddress) {
	if order == nil {
		order = serverNodes(servers)
	}
	a := raftmeta.Assignment{Replicas: order}
	id, addr := preferredLeader(a, state, alive, servers, true, 0)
	if id == 0 {
		anyState := map[raftmeta.NodeID]raftmeta.NodeState{}
		for k := range state {
			if k != n.id {
				anyState[k] = raftmeta.NodeActive
			}
		}
		id, addr = preferredLeader(a, anyState, alive, servers, true, 0)
	}
	if id == 0 || !n.live.AnsweringNow(addr) {
		return 0, ""
	}
	return id, addr
}
