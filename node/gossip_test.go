package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/node/membership"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// describeStates is node id → state as n's DescribeCluster reports it.
func describeStates(t *testing.T, n *Node) map[raftmeta.NodeID]raftmeta.NodeState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := n.DescribeCluster(ctx)
	if err != nil {
		t.Fatalf("node %d DescribeCluster: %v", n.ID(), err)
	}
	out := map[raftmeta.NodeID]raftmeta.NodeState{}
	for _, ni := range info.Nodes {
		out[ni.ID] = ni.State
	}
	return out
}

// allAlive reports whether n's gossip view holds exactly the given ids,
// all alive and active.
func allAlive(n *Node, ids ...int32) bool {
	ms := n.members()
	if len(ms) != len(ids) {
		return false
	}
	for i, m := range ms {
		if m.ID != ids[i] || m.Status != membership.StatusAlive || m.State != membership.StateActive {
			return false
		}
	}
	return true
}

// TestClusterGossip: three nodes with a shared gossip key see each other
// alive through gossip (node 3 joins through a gossip address only); a node
// whose gossip stops shows as dead, a node closed cleanly shows as left,
// and a process with another key cannot join.
func TestClusterGossip(t *testing.T) {
	longCluster(t)
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	nodes := make([]*Node, 3)
	defer func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	}()
	cfg := clusterConfig(t.TempDir())
	cfg.GossipKey = key
	nodes[0] = startCluster(t, cfg)
	// Node 2 joins through a peer address (its id is allocated)...
	cfg = clusterConfig(t.TempDir())
	cfg.GossipKey = key
	cfg.Join = []string{nodes[0].peers.Addr()}
	nodes[1] = startCluster(t, cfg)
	// ... node 3 (configured id) through node 2's gossip address only.
	cfg = clusterConfig(t.TempDir())
	cfg.GossipKey = key
	cfg.NodeID = 3
	cfg.Join = []string{nodes[1].gossip.m.GossipAddr()}
	nodes[2] = startCluster(t, cfg)
	for i, n := range nodes {
		if n.ID() != raftmeta.NodeID(i+1) {
			t.Fatalf("node %d has id %d", i+1, n.ID())
		}
	}
	waitFor(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			if !allAlive(n, 1, 2, 3) {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		st := describeStates(t, n)
		for id := raftmeta.NodeID(1); id <= 3; id++ {
			if st[id] != raftmeta.NodeActive {
				t.Fatalf("node %d describes node %d as %q, want active: %v", n.ID(), id, st[id], st)
			}
		}
		// The catalog records the bound gossip addresses.
		for _, m := range n.meta.Nodes() {
			if want := nodes[m.ID-1].gossip.m.GossipAddr(); m.GossipAddr != want {
				t.Fatalf("catalog of node %d: node %d gossip address %q, want %q", n.ID(), m.ID, m.GossipAddr, want)
			}
		}
	}

	// A process with another key (or none) is not let in.
	for _, k := range [][]byte{nil, []byte("fedcba9876543210")} {
		m, err := membership.Start(membership.Config{
			BindAddr: "127.0.0.1:0", Meta: membership.Meta{ID: 99, State: membership.StateJoining},
			SecretKey: k, Logger: testLogger(), Profile: membership.ProfileLocal,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = m.Join(ctx, []string{nodes[0].gossip.m.GossipAddr()})
		cancel()
		m.Shutdown()
		if !errors.Is(err, membership.ErrJoin) {
			t.Fatalf("join with key %q: %v, want ErrJoin", k, err)
		}
		for _, mb := range nodes[0].members() {
			if mb.ID == 99 {
				t.Fatalf("a member with key %q got in: %+v", k, mb)
			}
		}
	}

	// Node 3's gossip stops without a leave (as in a crash): the others
	// declare it dead, although the catalog still says active.
	if err := nodes[2].gossip.m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool {
		return describeStates(t, nodes[0])[3] == StateDead && describeStates(t, nodes[1])[3] == StateDead
	})
	if _, ok := nodes[0].DeadSince()[3]; !ok {
		t.Fatalf("node 1 DeadSince %v lacks node 3", nodes[0].DeadSince())
	}
	for _, m := range nodes[0].meta.Nodes() {
		if m.ID == 3 && m.State != raftmeta.NodeActive {
			t.Fatalf("catalog state of node 3 is %q; gossip must not write it", m.State)
		}
	}
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	nodes[2] = nil

	// Node 2 closes cleanly: it leaves, so node 1 shows it left, not dead.
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	nodes[1] = nil
	waitFor(t, 20*time.Second, func() bool { return describeStates(t, nodes[0])[2] == raftmeta.NodeLeft })
	if _, ok := nodes[0].DeadSince()[2]; ok {
		t.Fatal("a node that left is recorded as dead")
	}
	if st := describeStates(t, nodes[0]); st[1] != raftmeta.NodeActive || st[3] != StateDead {
		t.Fatalf("node 1 describes %v, want 1 active, 2 left, 3 dead", st)
	}
}

func TestDecodeGossipKey(t *testing.T) {
	for _, tc := range []struct {
		key     string
		wantLen int
		wantErr string
	}{
		{"", 0, ""},
		{base64.StdEncoding.EncodeToString(make([]byte, 16)), 16, ""},
		{base64.StdEncoding.EncodeToString(make([]byte, 24)), 24, ""},
		{base64.StdEncoding.EncodeToString(make([]byte, 32)), 32, ""},
		{base64.StdEncoding.EncodeToString(make([]byte, 15)), 0, "15 bytes"},
		{"not base64!", 0, "not base64"},
	} {
		t.Run(fmt.Sprintf("%q", tc.key), func(t *testing.T) {
			k, err := decodeGossipKey(tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(k) != tc.wantLen {
				t.Fatalf("got %d bytes, %v; want %d bytes", len(k), err, tc.wantLen)
			}
		})
	}
}

func TestGossipNodeState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		catalog raftmeta.NodeState
		mb      *membership.Member
		want    raftmeta.NodeState
	}{
		{"unknown to gossip", raftmeta.NodeActive, nil, raftmeta.NodeActive},
		{"alive joining", raftmeta.NodeActive, &membership.Member{Meta: membership.Meta{State: "joining"}, Status: membership.StatusAlive}, raftmeta.NodeJoining},
		{"alive draining", raftmeta.NodeActive, &membership.Member{Meta: membership.Meta{State: "draining"}, Status: membership.StatusAlive}, raftmeta.NodeDraining},
		{"alive, drained in the catalog", raftmeta.NodeDraining, &membership.Member{Meta: membership.Meta{State: "active"}, Status: membership.StatusAlive}, raftmeta.NodeDraining},
		{"dead, drained in the catalog", raftmeta.NodeDraining, &membership.Member{Meta: membership.Meta{State: "active"}, Status: membership.StatusDead}, StateDead},
		{"alive no state", raftmeta.NodeJoining, &membership.Member{Status: membership.StatusAlive}, raftmeta.NodeJoining},
		{"dead", raftmeta.NodeActive, &membership.Member{Meta: membership.Meta{State: "active"}, Status: membership.StatusDead}, StateDead},
		{"left", raftmeta.NodeActive, &membership.Member{Meta: membership.Meta{State: "active"}, Status: membership.StatusLeft}, raftmeta.NodeLeft},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gossipNodeState(tc.catalog, tc.mb); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
