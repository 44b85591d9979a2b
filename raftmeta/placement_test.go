package raftmeta

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func activeNodes(ids ...NodeID) []Node {
	out := make([]Node, len(ids))
	for i, id := range ids {
		out[i] = Node{ID: id, State: NodeActive}
	}
	return out
}

func TestPlacement(t *testing.T) {
	tests := []struct {
		nodes   []Node
		buckets int32
		rf      int
		wantRF  int
	}{
		{activeNodes(1), 1, 1, 1},
		{activeNodes(1), 8, 3, 1},
		{activeNodes(1, 2, 3), 3, 3, 3},
		{activeNodes(1, 2, 3), 12, 2, 2},
		{activeNodes(4, 2, 9, 7, 5), 100, 3, 3},
		{activeNodes(1, 2, 3, 4, 5, 6), 4096, 5, 5},
		{append(activeNodes(1, 2, 3), Node{ID: 4, State: NodeDraining}, Node{ID: 5, State: NodeJoining}, Node{ID: 6, State: NodeLeft}), 9, 5, 3},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("n%d_b%d_rf%d", len(tc.nodes), tc.buckets, tc.rf), func(t *testing.T) {
			got, err := Placement(tc.nodes, tc.buckets, tc.rf)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != int(tc.buckets) {
				t.Fatalf("%d buckets placed, want %d", len(got), tc.buckets)
			}
			var active []NodeID
			for _, n := range tc.nodes {
				if n.State == NodeActive {
					active = append(active, n.ID)
				}
			}
			leaders := map[NodeID]int{}
			replicas := map[NodeID]int{}
			for b, reps := range got {
				if len(reps) != tc.wantRF {
					t.Fatalf("bucket %d has %d replicas, want %d", b, len(reps), tc.wantRF)
				}
				for i, r := range reps {
					if !slices.Contains(active, r) {
						t.Fatalf("bucket %d placed on inactive or unknown node %d", b, r)
					}
					if slices.Contains(reps[:i], r) {
						t.Fatalf("bucket %d has node %d twice: %v", b, r, reps)
					}
					replicas[r]++
				}
				leaders[reps[0]]++
			}
			// Leaders and replicas are spread evenly: counts differ by at most one.
			spread := func(what string, m map[NodeID]int, total int) {
				lo, hi := total, 0
				for _, id := range active {
					lo, hi = min(lo, m[id]), max(hi, m[id])
				}
				if int(tc.buckets) >= len(active) && hi-lo > 1 {
					t.Fatalf("%s unevenly spread: %v", what, m)
				}
			}
			spread("leaders", leaders, int(tc.buckets))
			spread("replicas", replicas, int(tc.buckets)*tc.wantRF)

			// Deterministic, and independent of input order.
			rev := slices.Clone(tc.nodes)
			slices.Reverse(rev)
			again, _ := Placement(rev, tc.buckets, tc.rf)
			for b := range got {
				if !slices.Equal(got[b], again[b]) {
					t.Fatalf("bucket %d: %v then %v", b, got[b], again[b])
				}
			}
		})
	}
}

func TestPlacementFollowersSpread(t *testing.T) {
	// With 4 nodes and rf 2, the followers of node 1's buckets must not all
	// sit on one node: losing node 1 then spreads its load.
	got, err := Placement(activeNodes(1, 2, 3, 4), 12, 2)
	if err != nil {
		t.Fatal(err)
	}
	followers := map[NodeID]bool{}
	for _, reps := range got {
		if reps[0] == 1 {
			followers[reps[1]] = true
		}
	}
	if len(followers) < 3 {
		t.Fatalf("node 1's followers are only on %v: %v", followers, got)
	}
}

func TestPlacementFromRotatesStart(t *testing.T) {
	a, _ := PlacementFrom(activeNodes(1, 2, 3), 1, 1, 0)
	b, _ := PlacementFrom(activeNodes(1, 2, 3), 1, 1, 1)
	c, _ := PlacementFrom(activeNodes(1, 2, 3), 1, 1, -5)
	if a[0][0] != 1 || b[0][0] != 2 || len(c) != 1 {
		t.Fatalf("starts: %v %v %v", a, b, c)
	}
}

func TestPlacementErrors(t *testing.T) {
	if _, err := Placement(nil, 1, 1); !errors.Is(err, ErrNoActiveNodes) {
		t.Fatalf("no nodes: %v", err)
	}
	if _, err := Placement([]Node{{ID: 1, State: NodeDraining}}, 1, 1); !errors.Is(err, ErrNoActiveNodes) {
		t.Fatalf("only draining: %v", err)
	}
	if _, err := Placement(activeNodes(1), 0, 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("0 buckets: %v", err)
	}
	if _, err := Placement(activeNodes(1), 1, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("rf 0: %v", err)
	}
}
