package raftmeta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestMetaThreeNodes runs a bootstrapped node, adds two voters over the
// in-memory transport, and checks that followers replicate the catalog and
// refuse proposals with the leader's identity.
func TestMetaThreeNodes(t *testing.T) {
	ctx := context.Background()
	type member struct {
		m     *Meta
		trans *raft.InmemTransport
	}
	var ms []member
	for i := 1; i <= 3; i++ {
		addr, trans := raft.NewInmemTransport("")
		// Node 1 must lead throughout: a lease of 50 ms lapsed on a host
		// whose two cores were busy ("leadership lost while committing").
		m, err := Open(Config{
			Dir: t.TempDir(), NodeID: NodeID(i), LocalAddr: addr, Transport: trans, Bootstrap: i == 1, Logger: quietLogger(),
			HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 300 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, member{m, trans})
	}
	for i := range ms {
		for j := range ms {
			if i != j {
				ms[i].trans.Connect(ms[j].trans.LocalAddr(), ms[j].trans)
			}
		}
	}
	defer func() {
		for _, x := range ms {
			closeMeta(t, x.m, x.trans)
		}
	}()
	leader := ms[0].m
	waitLeader(t, leader)
	for i := 1; i < 3; i++ {
		if err := leader.AddVoter(ctx, NodeID(i+1), ms[i].trans.LocalAddr()); err != nil {
			t.Fatalf("AddVoter %d: %v", i+1, err)
		}
	}
	servers, err := leader.Servers()
	if err != nil || len(servers) != 3 {
		t.Fatalf("Servers = %v, %v", servers, err)
	}
	for i := 1; i <= 3; i++ {
		if err := leader.RegisterNode(ctx, Node{ID: NodeID(i), State: NodeActive}); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.CreateDatabase(ctx, "db", "", false); err != nil {
		t.Fatal(err)
	}
	spec := testSpec("db", "t")
	spec.BucketCount = 6
	id, err := leader.CreateTable(ctx, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	// A second table starts its leaders where the first stopped.
	spec2 := testSpec("db", "t2")
	spec2.BucketCount = 1
	id2, err := leader.CreateTable(ctx, spec2, false)
	if err != nil {
		t.Fatal(err)
	}
	as := leader.AssignmentsForTable(id)
	leaders := map[NodeID]int{}
	for _, a := range as {
		if len(a.Replicas) != 3 {
			t.Fatalf("assignment %+v: want 3 replicas (default rf)", a)
		}
		leaders[a.Replicas[0]]++
	}
	if len(leaders) != 3 || leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Fatalf("preferred leaders %v, want 2 per node", leaders)
	}
	if a2 := leader.AssignmentsForTable(id2); a2[0].Replicas[0] != 1 {
		// 6 buckets already placed on 3 nodes: rotation comes back to node 1.
		t.Fatalf("second table's first leader = %v", a2[0].Replicas)
	}
	want, _ := leader.FSM().MarshalState()
	wantNoIdx := stateWithoutIndex(t, want)
	for i := 1; i < 3; i++ {
		f := ms[i].m
		waitFor(t, 10*time.Second, func() error {
			got, _ := f.FSM().MarshalState()
			if !protoEqual(stateWithoutIndex(t, got), wantNoIdx) {
				return fmt.Errorf("node %d has not caught up", i+1)
			}
			return nil
		})
		err := f.CreateDatabase(ctx, "x", "", false)
		if !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "node 1") {
			t.Fatalf("follower CreateDatabase = %v, want ErrNotLeader naming node 1", err)
		}
		if lid, addr := f.Leader(); lid != 1 || addr != ms[0].trans.LocalAddr() {
			t.Fatalf("follower sees leader %d at %s", lid, addr)
		}
		if f.ClusterID() != leader.ClusterID() {
			t.Fatalf("cluster id differs on node %d", i+1)
		}
	}
	if err := ms[1].m.AddNonvoter(ctx, 9, "x"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("follower AddNonvoter = %v", err)
	}
	if err := leader.RemoveServer(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if servers, _ := leader.Servers(); len(servers) != 2 {
		t.Fatalf("Servers after remove = %v", servers)
	}
}
