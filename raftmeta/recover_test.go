package raftmeta

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestRecoverAfterLosingTwoOfThreeVoters: a metadata group of three loses
// two voters for good; the survivor, recovered, leads alone with the whole
// catalog and takes changes again.
func TestRecoverAfterLosingTwoOfThreeVoters(t *testing.T) {
	ctx := context.Background()
	var dirs []string
	var ms []*Meta
	var trs []*raft.InmemTransport
	for i := 1; i <= 3; i++ {
		addr, trans := raft.NewInmemTransport("")
		dir := t.TempDir()
		m, err := Open(Config{
			Dir: dir, NodeID: NodeID(i), LocalAddr: addr, Transport: trans, Bootstrap: i == 1, Logger: quietLogger(),
			HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
			LeaderLeaseTimeout: 300 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		dirs, ms, trs = append(dirs, dir), append(ms, m), append(trs, trans)
	}
	for _, a := range trs {
		for _, b := range trs {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	leader := ms[0]
	waitLeader(t, leader)
	for i := 1; i < 3; i++ {
		if err := leader.AddVoter(ctx, NodeID(i+1), trs[i].LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.RegisterNode(ctx, Node{ID: 1, State: NodeActive}); err != nil {
		t.Fatal(err)
	}
	if err := leader.CreateDatabase(ctx, "kept", "", false); err != nil {
		t.Fatal(err)
	}
	id, err := leader.CreateTable(ctx, testSpec("kept", "t"), false)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := leader.FSM().MarshalState()
	for i, m := range ms {
		closeMeta(t, m, trs[i])
	}

	lost := func(id NodeID) bool { return id == 2 || id == 3 }
	if _, err := Recover(dirs[0], 2, lost, true, quietLogger()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("recovering a lost node's own directory: %v", err)
	}
	dry, err := Recover(dirs[0], 1, lost, true, quietLogger())
	if err != nil || dry.Outcome != MetaRecovered || !slices.Equal(dry.Voters, []NodeID{1, 2, 3}) ||
		len(dry.Servers) != 1 || dry.Servers[0].ID != "1" || dry.Servers[0].Suffrage != raft.Voter {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if res, err := Recover(dirs[0], 1, lost, false, quietLogger()); err != nil || res.Outcome != MetaRecovered {
		t.Fatalf("recover: %+v, %v", res, err)
	}
	// Node 1 opens alone, no bootstrap: it elects itself.
	m, trans := openTestMeta(t, dirs[0], false)
	defer closeMeta(t, m, trans)
	waitLeader(t, m)
	got, _ := m.FSM().MarshalState()
	if !protoEqual(stateWithoutIndex(t, got), stateWithoutIndex(t, want)) {
		t.Fatal("the recovered catalog differs from the one before the loss")
	}
	if _, err := m.TableByID(id); err != nil {
		t.Fatal(err)
	}
	if err := m.CreateDatabase(ctx, "after", "", false); err != nil {
		t.Fatalf("a change after recovery: %v", err)
	}
	servers, err := m.Servers()
	if err != nil || len(servers) != 1 || servers[0].ID != "1" {
		t.Fatalf("servers after recovery: %+v, %v", servers, err)
	}
}

// TestRecoverOutcomes: nothing to do when a majority survives or there is
// no state.
func TestRecoverOutcomes(t *testing.T) {
	dir := t.TempDir()
	if res, err := Recover(dir, 1, func(NodeID) bool { return false }, false, quietLogger()); err != nil || res.Outcome != MetaNoState {
		t.Fatalf("empty directory: %+v, %v", res, err)
	}
	m, trans := openTestMeta(t, dir, true)
	waitLeader(t, m)
	closeMeta(t, m, trans)
	// A group of one voter, node 1, loses node 7 (not a member).
	res, err := Recover(dir, 1, func(id NodeID) bool { return id == 7 }, false, quietLogger())
	if err != nil || res.Outcome != MetaNotNeeded {
		t.Fatalf("nothing lost: %+v, %v", res, err)
	}
	// Node 5 was never a member of it.
	res, err = Recover(dir, 5, func(id NodeID) bool { return id == 1 }, false, quietLogger())
	if err != nil || res.Outcome != MetaNotMember {
		t.Fatalf("not a member: %+v, %v", res, err)
	}
}
