package node

import (
	"context"
	"slices"

	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
)

// Replication health (docs/ARCHITECTURE.md "In-sync replicas"). A bucket
// leader knows which of its group's replicas keep up with it
// (replica.InSync, within raft.replica_max_lag); a bucket whose in-sync
// replicas are fewer than its assigned replicas is under-replicated, and
// a replica assigned to a node that has not opened it (it fails to open,
// e.g. a damaged segment, or is still opening) is offline. Each node
// reports its own (node.stats with statsWithReplication):
// DescribeCluster and /metrics show the counts, GetTableLayout the
// in-sync replicas of each bucket when asked.

// replicationOf fills in the replication health of s, this node's stats:
// the in-sync replicas of each bucket led here and the counts.
func (n *Node) replicationOf(s *nodeStats) {
	maxLag := n.cfg.Raft.ReplicaMaxLag.Duration
	assigned := map[raftmeta.BucketID][]raftmeta.NodeID{}
	rs := &replicationStats{}
	for _, a := range n.meta.Assignments() {
		assigned[a.BucketID] = a.Replicas
		if slices.Contains(a.Replicas, n.id) && n.replica(a.BucketID) == nil {
			rs.Offline++
		}
	}
	for i := range s.Buckets {
		b := &s.Buckets[i]
		r := n.replica(b.Bucket)
		if r == nil || b.Leader != n.id {
			continue
		}
		servers, ok := r.InSync(maxLag)
		if !ok {
			continue // lost the lead since localStats looked
		}
		for _, id := range servers {
			if nid := parseNodeID(string(id)); nid != 0 {
				b.InSync = append(b.InSync, nid)
			}
		}
		slices.Sort(b.InSync)
		if want, ok := assigned[b.Bucket]; ok && underReplicated(want, b.InSync) {
			rs.UnderReplicated++
		}
	}
	s.Replication = rs
}

// replicationHealth is this node's replication health.
func (n *Node) replicationHealth() replicationStats {
	return *n.localStats(true).Replication
}

// underReplicated reports whether a replica of assigned is not in inSync.
func underReplicated(assigned, inSync []raftmeta.NodeID) bool {
	for _, id := range assigned {
		if !slices.Contains(inSync, id) {
			return true
		}
	}
	return false
}

// inSyncOf returns the in-sync replicas of every bucket in lay that its
// leader reported, asking the leaders' nodes; a bucket whose leader did
// not answer is missing.
func (n *Node) inSyncOf(ctx context.Context, lay []rpc.BucketLayout) map[raftmeta.BucketID][]raftmeta.NodeID {
	var ask []raftmeta.NodeID
	for _, l := range lay {
		if l.Leader != 0 && !slices.Contains(ask, l.Leader) {
			ask = append(ask, l.Leader)
		}
	}
	out := map[raftmeta.BucketID][]raftmeta.NodeID{}
	for leader, s := range n.statsOf(ctx, ask, true) {
		for _, b := range s.Buckets {
			if b.Leader == leader && len(b.InSync) > 0 {
				out[b.Bucket] = b.InSync
			}
		}
	}
	return out
}
