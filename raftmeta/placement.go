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

// ReplaceDown returns the assignments among as that must change because
// some of their replicas are on down nodes, with each down replica replaced
// in place (so a replaced preferred leader's successor is preferred) by a
// node of targets that holds no replica of the bucket; the target with the
// fewest replicas overall (counting the changes made so far) is taken,
// ties to the smallest id. A bucket is changed only when its Raft group
// has a leader that can add and remove members: when its replicas that are
// not down are a majority of its set, or else when led(a) says its
// group has a leader anyway (recovery made a survivor its only voter; led
// is asked only then). Without a leader, moving replicas would only make
// the returning nodes delete their copies. A down replica with no free
// target stays. The input is not modified; the result is a pure function
// of the arguments (targets in any order).
func ReplaceDown(as []Assignment, down func(NodeID) bool, led func(Assignment) bool, targets []NodeID) []Assignment {
	count, ts := targetLoad(as, targets)
	var out []Assignment
	for _, a := range as {
		dead := 0
		for _, r := range a.Replicas {
			if down(r) {
				dead++
			}
		}
		if dead == 0 || 2*(len(a.Replicas)-dead) <= len(a.Replicas) && (dead == len(a.Replicas) || !led(a)) {
			continue
		}
		reps := slices.Clone(a.Replicas)
		changed := false
		for i, r := range reps {
			if !down(r) {
				continue
			}
			best := leastLoaded(ts, count, func(t NodeID) bool { return down(t) || slices.Contains(reps, t) })
			if best == 0 {
				continue
			}
			reps[i] = best
			count[best]++
			changed = true
		}
		if changed {
			out = append(out, Assignment{BucketID: a.BucketID, Replicas: reps, Epoch: a.Epoch})
		}
	}
	return out
}

// MoveOff returns the assignments among as that change to move replicas
// off leaving nodes (being decommissioned, and up): in each bucket the
// first replica on a leaving node is replaced in place by the node of
// targets with the fewest replicas overall (counting the changes made so
// far, ties to the smallest id) that holds none of the bucket. One replica
// per bucket and call, as Rebalance moves them: the group adds the new
// replica and removes the old one only once the new one votes, so it never
// has fewer voting copies than assigned, and the old one serves until then.
// A bucket is changed only when its replicas that are not down are a
// majority (the leaving ones count as up: they are), so that its group
// has a leader to make the change. stuck lists the buckets that have a
// replica on a leaving node and no free target. The input is not
// modified; the result is a pure function of the arguments.
func MoveOff(as []Assignment, leaving, down func(NodeID) bool, targets []NodeID) (out []Assignment, stuck []BucketID) {
	count, ts := targetLoad(as, targets)
	for _, a := range as {
		i := slices.IndexFunc(a.Replicas, leaving)
		if i < 0 {
			continue
		}
		up := 0
		for _, r := range a.Replicas {
			if !down(r) {
				up++
			}
		}
		if 2*up <= len(a.Replicas) {
			continue
		}
		best := leastLoaded(ts, count, func(t NodeID) bool { return leaving(t) || down(t) || slices.Contains(a.Replicas, t) })
		if best == 0 {
			stuck = append(stuck, a.BucketID)
			continue
		}
		reps := slices.Clone(a.Replicas)
		reps[i] = best
		count[best]++
		out = append(out, Assignment{BucketID: a.BucketID, Replicas: reps, Epoch: a.Epoch})
	}
	return out, stuck
}

// Grow returns the assignments among as whose bucket has fewer replicas
// than want(its table id) (a table placed while fewer nodes were active than
// its replication factor), with replicas appended, up to want, from the
// nodes of targets that hold none of the bucket: the target with the fewest
// replicas overall (counting the changes made so far) first, ties to the
// smallest id. The bucket's preferred leader stays. A bucket with a replica
// on a down node is left alone: ReplaceDown moves that one first, and its
// group may have no leader to add members. The input is not modified; the
// result is a pure function of the arguments (targets in any order).
func Grow(as []Assignment, want func(tableID int64) int, down func(NodeID) bool, targets []NodeID) []Assignment {
	count, ts := targetLoad(as, targets)
	var out []Assignment
	for _, a := range as {
		n := want(a.TableID)
		if len(a.Replicas) >= n || slices.ContainsFunc(a.Replicas, down) {
			continue
		}
		reps := slices.Clone(a.Replicas)
		for len(reps) < n {
			best := leastLoaded(ts, count, func(t NodeID) bool { return down(t) || slices.Contains(reps, t) })
			if best == 0 {
				break
			}
			reps = append(reps, best)
			count[best]++
		}
		if len(reps) > len(a.Replicas) {
			out = append(out, Assignment{BucketID: a.BucketID, Replicas: reps, Epoch: a.Epoch})
		}
	}
	return out
}

// Shrink returns the assignments among as whose bucket has more replicas
// than want(its table id) > 0 (its factor was lowered), with the surplus
// removed: replicas on down nodes first, then those on the nodes holding
// the most replicas overall (counting the changes made so far), ties to
// the later in the bucket's list. The first replica (the preferred leader)
// goes last. want 0 means no explicit factor: never shrunk. The input is
// not modified; the result is a pure function of the arguments.
func Shrink(as []Assignment, want func(tableID int64) int, down func(NodeID) bool) []Assignment {
	count := map[NodeID]int{}
	for _, a := range as {
		for _, r := range a.Replicas {
			count[r]++
		}
	}
	var out []Assignment
	for _, a := range as {
		n := want(a.TableID)
		if n <= 0 || len(a.Replicas) <= n {
			continue
		}
		reps := slices.Clone(a.Replicas)
		for len(reps) > n {
			drop := len(reps) - 1
			for i := len(reps) - 1; i >= 1; i-- {
				switch di, dd := down(reps[i]), down(reps[drop]); {
				case di && !dd, di == dd && count[reps[i]] > count[reps[drop]]:
					drop = i
				}
			}
			if down(reps[0]) && !down(reps[drop]) {
				drop = 0
			}
			count[reps[drop]]--
			reps = slices.Delete(reps, drop, drop+1)
		}
		out = append(out, Assignment{BucketID: a.BucketID, Replicas: reps, Epoch: a.Epoch})
	}
	return out
}

// targetLoad counts the replicas of as on each node of targets and returns
// the targets sorted, without duplicates.
func targetLoad(as []Assignment, targets []NodeID) (map[NodeID]int, []NodeID) {
	count := map[NodeID]int{}
	for _, t := range targets {
		count[t] += 0
	}
	for _, a := range as {
		for _, r := range a.Replicas {
			if _, ok := count[r]; ok {
				count[r]++
			}
		}
	}
	ts := slices.Clone(targets)
	slices.Sort(ts)
	return count, slices.Compact(ts)
}

// leastLoaded returns the node of ts (sorted) with the fewest replicas by
// count, ties to the smallest id, skipping those skip refuses; 0 if none.
func leastLoaded(ts []NodeID, count map[NodeID]int, skip func(NodeID) bool) NodeID {
	best := NodeID(0)
	for _, t := range ts {
		if skip(t) {
			continue
		}
		if best == 0 || count[t] < count[best] {
			best = t
		}
	}
	return best
}

// Rebalance returns the assignments among as that change so that the
// replicas, and then the preferred leaders (first replicas), are spread
// evenly over nodes: at most one apart between any two of them. A replica
// moves from a node holding the most to one holding the fewest, in place
// (keeping its position), never onto a node that already holds the
// bucket; a preferred leader changes by reordering a bucket's replicas.
// Replicas on nodes not in nodes (draining, down) are left where they are.
// A bucket has at most one replica moved per run: the group adds the new
// replica and removes the old one only after the new one votes (a replica
// moved away keeps serving until its group has dropped it), so the group
// never has fewer voting copies than assigned. Running Rebalance again
// after the moves finished continues. The input is not modified; the result is
// a pure function of the arguments (nodes in any order).
func Rebalance(as []Assignment, nodes []NodeID) []Assignment {
	return reassign(as, nodes, func(out []Assignment, ids []NodeID) {
		spreadReplicas(out, ids)
		spreadLeaders(out, ids)
	})
}

// SpreadLeaders returns the assignments among as whose preferred leader
// (first replica) changes so that the preferred leaders are spread evenly
// over nodes, at most one apart between any two of them: Rebalance's second
// half, without moving any replica. A preferred leader changes by swapping
// a bucket's replica on a node with the fewest to the front, in place of
// one on a node with the most. The input is not modified; the result is a
// pure function of the arguments (nodes in any order).
func SpreadLeaders(as []Assignment, nodes []NodeID) []Assignment {
	return reassign(as, nodes, spreadLeaders)
}

// reassign runs spread on a copy of as with nodes sorted and without
// duplicates (nothing with fewer than two nodes) and returns the
// assignments it changed.
func reassign(as []Assignment, nodes []NodeID, spread func(out []Assignment, ids []NodeID)) []Assignment {
	ids := slices.Clone(nodes)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) < 2 {
		return nil
	}
	out := make([]Assignment, len(as))
	for i, a := range as {
		out[i] = Assignment{BucketID: a.BucketID, Replicas: slices.Clone(a.Replicas), Epoch: a.Epoch}
	}
	spread(out, ids)
	var changed []Assignment
	for i, a := range out {
		if !slices.Equal(a.Replicas, as[i].Replicas) {
			changed = append(changed, a)
		}
	}
	return changed
}

// spreadReplicas moves replicas of out (in place) from the nodes of ids
// holding the most to those holding the fewest, at most one per bucket.
func spreadReplicas(out []Assignment, ids []NodeID) {
	count := map[NodeID]int{}
	for _, a := range out {
		for _, r := range a.Replicas {
			count[r]++
		}
	}
	movedBucket := make([]bool, len(out))
	for range len(out) * len(ids) {
		hi, lo := extremes(ids, count)
		if count[hi]-count[lo] <= 1 {
			break
		}
		moved := false
		// Prefer moving a follower: the leader stays put.
		for pass := 0; pass < 2 && !moved; pass++ {
			for i := range out {
				reps := out[i].Replicas
				j := slices.Index(reps, hi)
				if j < 0 || (pass == 0 && j == 0) || slices.Contains(reps, lo) || movedBucket[i] {
					continue
				}
				movedBucket[i] = true
				reps[j] = lo
				count[hi]--
				count[lo]++
				moved = true
				break
			}
		}
		if !moved {
			break
		}
	}
}

// spreadLeaders reorders the replicas of out (in place) so that the first
// replicas are spread evenly over ids (sorted, without duplicates).
func spreadLeaders(out []Assignment, ids []NodeID) {
	lead := map[NodeID]int{}
	for _, a := range out {
		lead[a.Replicas[0]]++
	}
	for range len(out) * len(ids) {
		hi, lo := extremes(ids, lead)
		if lead[hi]-lead[lo] <= 1 {
			break
		}
		moved := false
		for i := range out {
			reps := out[i].Replicas
			j := slices.Index(reps, lo)
			if reps[0] != hi || j < 0 {
				continue
			}
			reps[0], reps[j] = reps[j], reps[0]
			lead[hi]--
			lead[lo]++
			moved = true
			break
		}
		if !moved {
			break
		}
	}
}

// extremes returns the nodes of ids (sorted) with the most and the fewest
// of count (ties: the smallest id).
func extremes(ids []NodeID, count map[NodeID]int) (hi, lo NodeID) {
	hi, lo = ids[0], ids[0]
	for _, id := range ids {
		if count[id] > count[hi] {
			hi = id
		}
		if count[id] < count[lo] {
			lo = id
		}
	}
	return hi, lo
}

// LeastLoaded returns the node of targets holding the fewest replicas
// among as, ties to the smallest id; 0 when targets is empty. It places
// the one replica a restored bucket starts with (Grow adds the rest).
func LeastLoaded(as []Assignment, targets []NodeID) NodeID {
	count, ts := targetLoad(as, targets)
	return leastLoaded(ts, count, func(NodeID) bool { return false })
}
