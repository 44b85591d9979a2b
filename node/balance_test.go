package node

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/raftmeta"
)

// TestPreferredLeader checks whom leadership is handed to: the first
// replica, if active, up and a voter; from a draining node the first
// replica that is all three, and after failed transfers the next ones in
// turn.
func TestPreferredLeader(t *testing.T) {
	a := raftmeta.Assignment{Replicas: []raftmeta.NodeID{1, 2, 3, 4}}
	voters := func(ids ...raftmeta.NodeID) []raft.Server {
		var out []raft.Server
		for _, id := range ids {
			out = append(out, raft.Server{ID: nodeServer(id), Address: raft.ServerAddress("addr-" + nodeServer(id)), Suffrage: raft.Voter})
		}
		return out
	}
	active := map[raftmeta.NodeID]raftmeta.NodeState{1: raftmeta.NodeActive, 2: raftmeta.NodeActive, 3: raftmeta.NodeActive, 4: raftmeta.NodeActive}
	up := map[raftmeta.NodeID]bool{1: true, 2: true, 3: true, 4: true}
	with := func(m map[raftmeta.NodeID]raftmeta.NodeState, id raftmeta.NodeID, s raftmeta.NodeState) map[raftmeta.NodeID]raftmeta.NodeState {
		out := map[raftmeta.NodeID]raftmeta.NodeState{}
		for k, v := range m {
			out[k] = v
		}
		out[id] = s
		return out
	}
	// Node 1 draining, node 3 down, node 4 a nonvoter: from a draining
	// node only node 2 is eligible, whatever the failures.
	nonvoter4 := append(voters(1, 2, 3), raft.Server{ID: nodeServer(4), Address: "addr-4", Suffrage: raft.Nonvoter})
	down3 := map[raftmeta.NodeID]bool{1: true, 2: true, 3: false, 4: true}
	for _, tc := range []struct {
		name     string
		state    map[raftmeta.NodeID]raftmeta.NodeState
		alive    map[raftmeta.NodeID]bool
		servers  []raft.Server
		draining bool
		skip     int
		want     raftmeta.NodeID
	}{
		{"first replica", active, up, voters(1, 2, 3, 4), false, 0, 1},
		{"failures do not matter when not draining", active, up, voters(1, 2, 3, 4), false, 3, 1},
		{"first replica draining: no second choice", with(active, 1, raftmeta.NodeDraining), up, voters(1, 2, 3, 4), false, 0, 0},
		{"first replica not a voter", active, up, voters(2, 3, 4), false, 0, 0},
		{"draining: first eligible", with(active, 1, raftmeta.NodeDraining), up, voters(1, 2, 3, 4), true, 0, 2},
		{"draining: one failure, the next", with(active, 1, raftmeta.NodeDraining), up, voters(1, 2, 3, 4), true, 1, 3},
		{"draining: two failures", with(active, 1, raftmeta.NodeDraining), up, voters(1, 2, 3, 4), true, 2, 4},
		{"draining: round again", with(active, 1, raftmeta.NodeDraining), up, voters(1, 2, 3, 4), true, 3, 2},
		{"draining: only one eligible", with(active, 1, raftmeta.NodeDraining), down3, nonvoter4, true, 1, 2},
		{"draining: none eligible", with(with(active, 1, raftmeta.NodeDraining), 2, raftmeta.NodeDraining), down3, nonvoter4, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, addr := preferredLeader(a, tc.state, tc.alive, tc.servers, tc.draining, tc.skip)
			if got != tc.want {
				t.Fatalf("preferredLeader = %d, want %d", got, tc.want)
			}
			if wantAddr := raft.ServerAddress("addr-" + nodeServer(got)); got != 0 && addr != wantAddr || got == 0 && addr != "" {
				t.Fatalf("preferredLeader = %d with address %q", got, addr)
			}
		})
	}
}
