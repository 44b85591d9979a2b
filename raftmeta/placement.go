package raftmeta

import (
	"cmp"
	"fmt"
	"slices"
)

// Placement assigns replicas of buckets 0..buckets-1 to the active nodes
// among nodes. It is PlacementFrom with start 0.
func Placement(nodes []Node, buckets int32, rf int) ([][]NodeID, error) {
	return PlacementFrom(nodes, buckets, rf, 0)
}

// PlacementFrom assigns replicas of buckets 0..buckets-1 to the active nodes
// among nodes (sorted by id; input order does not matter), the way Kafka
// does: bucket b's first replica (its preferred leader) is active node
// (start+b) mod n, so leaders rotate evenly, and the followers sit at a
// shift from it that changes every n buckets, so a failed node's followers
// are spread over many nodes. No bucket has two replicas on one node. rf is
// capped at the number of active nodes (callers compare to log it).
// The result is a pure function of the arguments.
func PlacementFrom(nodes []Node, buckets int32, rf int, start int) ([][]NodeID, error) {
	if buckets < 1 || buckets > MaxBuckets {
		return nil, fmt.Errorf("%w: bucket count %d must be between 1 and %d", ErrInvalid, buckets, MaxBuckets)
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: replication factor %d must be at least 1", ErrInvalid, rf)
	}
	var ids []NodeID
	for _, n := range nodes {
		if n.State == NodeActive && !slices.Contains(ids, n.ID) {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("place %d buckets: %w (register a node or wait for one to become active)", buckets, ErrNoActiveNodes)
	}
	slices.SortFunc(ids, func(a, b NodeID) int { return cmp.Compare(a, b) })
	n := len(ids)
	rf = min(rf, n)
	if start < 0 {
		start = -(start + 1)
	}
	start %= n
	out := make([][]NodeID, buckets)
	for b := range int(buckets) {
		first := (start + b) % n
		reps := make([]NodeID, rf)
		reps[0] = ids[first]
		if n > 1 {
			shift := (b / n) % (n - 1)
			for j := 1; j < rf; j++ {
				reps[j] = ids[(first+1+(shift+j-1)%(n-1))%n]
			}
		}
		out[b] = reps
	}
	return out, nil
}
