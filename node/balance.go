package node

import (
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/node/replica"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Leaders are spread by placement: a bucket's first replica is its
// preferred leader, and placement rotates first replicas over the nodes.
// Raft elections pick any replica, so each node hands the buckets it leads
// back to their preferred leader once that node is active and caught up.
const (
	balanceInterval = 2 * time.Second
	// balanceBackoff is the least time between two transfers of one bucket,
	// so that a preferred leader that keeps failing does not cause churn.
	balanceBackoff = 30 * time.Second
)

func (n *Node) balanceLoop() {
	last := map[raftmeta.BucketID]time.Time{}
	t := time.NewTicker(balanceInterval)
	defer t.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-t.C:
		}
		n.balanceLeaders(last)
	}
}

// balanceLeaders transfers the leadership of every bucket this node leads
// but does not prefer to its preferred replica, when that node is active,
// holds the bucket in the group's configuration and was not tried within
// balanceBackoff.
func (n *Node) balanceLeaders(last map[raftmeta.BucketID]time.Time) {
	active := map[raftmeta.NodeID]bool{}
	peerAddr := map[raft.ServerID]raft.ServerAddress{}
	for _, m := range n.meta.Nodes() {
		active[m.ID] = m.State == raftmeta.NodeActive
		if m.PeerAddr != "" {
			peerAddr[raft.ServerID(strconv.Itoa(int(m.ID)))] = raft.ServerAddress(m.PeerAddr)
		}
	}
	n.fixAddresses(peerAddr)
	for _, a := range n.meta.Assignments() {
		if len(a.Replicas) < 2 || a.Replicas[0] == n.id || !slices.Contains(a.Replicas, n.id) {
			continue
		}
		pref := a.Replicas[0]
		if !active[pref] || time.Since(last[a.BucketID]) < balanceBackoff {
			continue
		}
		r := n.replica(a.BucketID)
		if r == nil || !r.IsLeader() {
			continue
		}
		f := r.Raft().GetConfiguration()
		if f.Error() != nil {
			continue
		}
		sid := raft.ServerID(strconv.Itoa(int(pref)))
		i := slices.IndexFunc(f.Configuration().Servers, func(s raft.Server) bool { return s.ID == sid && s.Suffrage == raft.Voter })
		if i < 0 {
			continue
		}
		last[a.BucketID] = time.Now()
		select {
		case <-n.quit:
			return
		default:
		}
		if err := r.Raft().LeadershipTransferToServer(sid, f.Configuration().Servers[i].Address).Error(); err != nil {
			n.logger.Debug("leadership transfer to the preferred replica", "table", a.TableID, "bucket", a.Bucket, "to", int32(pref), "err", err)
			continue
		}
		n.logger.Debug("bucket leadership handed to its preferred replica", "table", a.TableID, "bucket", a.Bucket, "to", int32(pref))
	}
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
