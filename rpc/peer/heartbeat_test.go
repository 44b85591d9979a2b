package peer

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// groupsOver starts n Raft groups, each with a replica on every Mux, and
// waits until each has a leader. It returns the replicas per group. The
// groups use 1 s heartbeat timeouts (heartbeats every 100 ms, the node's
// default): a few dozen groups of three on two shared cores under -race,
// next to other test packages, must not hold elections for lack of CPU.
func groupsOver(t *testing.T, ms []*Mux, n int) [][]*replica {
	t.Helper()
	return groupsOverWith(t, ms, n, func(*Transport) {})
}

// groupsOverWith is groupsOver with setup run on every transport first.
func groupsOverWith(t *testing.T, ms []*Mux, n int, setup func(*Transport)) [][]*replica {
	t.Helper()
	var groups [][]*replica
	for g := range n {
		reps := make([]*replica, len(ms))
		var cfg raft.Configuration
		for i, m := range ms {
			tr, err := m.Transport(fmt.Sprintf("g%d", g))
			if err != nil {
				t.Fatal(err)
			}
			setup(tr)
			reps[i] = &replica{id: raft.ServerID(fmt.Sprintf("n%d", i)), logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore(), tr: tr}
			cfg.Servers = append(cfg.Servers, raft.Server{ID: reps[i].id, Address: tr.LocalAddr(), Suffrage: raft.Voter})
		}
		for _, rp := range reps {
			c := testConfig(rp.id)
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 800*time.Millisecond
			rp.fsm = &counterFSM{}
			r, err := raft.NewRaft(c, rp.fsm, rp.logs, rp.logs, rp.snaps, rp.tr)
			if err != nil {
				t.Fatal(err)
			}
			rp.r = r
		}
		if err := reps[0].r.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatal(err)
		}
		groups = append(groups, reps)
	}
	for _, reps := range groups {
		leaderOf(t, reps)
	}
	return groups
}

func stopGroups(t *testing.T, groups [][]*replica) {
	for _, reps := range groups {
		for _, rp := range reps {
			rp.stop(t)
		}
	}
}

// leaders is the current leader index of every group.
func leaders(groups [][]*replica) []int {
	out := make([]int, len(groups))
	for g, reps := range groups {
		out[g] = -1
		for i, rp := range reps {
			if rp.r.State() == raft.Leader {
				out[g] = i
			}
		}
	}
	return out
}

// Heartbeats of many groups to one node share frames, and they do keep the
// followers from starting elections: over 3 s (three heartbeat timeouts) no
// group changes leader, and every group still commits.
func TestHeartbeatBatchesKeepGroupsStable(t *testing.T) {
	ms := []*Mux{listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	groups := groupsOver(t, ms, 30)
	defer stopGroups(t, groups)
	before := leaders(groups)
	var hb0, fr0 int64
	for _, m := range ms {
		h, f := m.HeartbeatStats()
		hb0, fr0 = hb0+h, fr0+f
	}
	time.Sleep(3 * time.Second)
	var hb, fr int64
	for _, m := range ms {
		h, f := m.HeartbeatStats()
		hb, fr = hb+h-hb0, fr+f-fr0
	}
	if after := leaders(groups); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("leaders changed while idle: %v -> %v", before, after)
	}
	if hb < 100 {
		t.Fatalf("only %d heartbeats went in batches", hb)
	}
	if fr*2 > hb {
		t.Fatalf("%d heartbeats took %d frames: not coalesced", hb, fr)
	}
	t.Logf("%d heartbeats in %d frames", hb, fr)
	for _, reps := range groups {
		applyN(t, reps[leaderOf(t, reps)].r, 3)
	}
}

// Against a node that does not accept heartbeat streams (an older binary),
// heartbeats go per group, as before, and the groups stay stable.
func TestHeartbeatsFallBackToPerGroupStreams(t *testing.T) {
	ms := []*Mux{listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")}
	for _, m := range ms {
		m.rejectHeartbeatStreams = true
	}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	groups := groupsOver(t, ms, 5)
	defer stopGroups(t, groups)
	before := leaders(groups)
	time.Sleep(2 * time.Second)
	if after := leaders(groups); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("leaders changed while idle: %v -> %v", before, after)
	}
	for _, m := range ms {
		for target, b := range m.hb {
			if !b.unsupported.Load() {
				t.Fatalf("batcher to %s still tries batches after the remote refused them", target)
			}
		}
	}
	for _, reps := range groups {
		applyN(t, reps[leaderOf(t, reps)].r, 3)
	}
}

// FuzzHeartbeatBatch: batch frames come from peers; answerBatch must
// reject malformed ones without panicking (no group is registered, so
// well-formed heartbeats are answered "unknown group").
func FuzzHeartbeatBatch(f *testing.F) {
	m, err := Listen("127.0.0.1:0", testOpts())
	if err != nil {
		f.Fatal(err)
	}
	defer m.Close()
	cs := getCodec()
	cs.w.b = cs.w.b[:0]
	frame, _ := cs.encodeFrame(typeAppendEntries, &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("x")}, Term: 3})
	seed := append([]byte{1, 2, 'g', '1'}, frame...)
	putCodec(cs)
	f.Add(seed)
	f.Add([]byte{0})
	f.Add([]byte{5, 1, 'a', 0, 0, 0, 1, 1})
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := m.answerBatch(typeHeartbeatBatch, body)
		if err == nil && len(out) < frameHdrLen {
			t.Fatalf("answer of %d bytes", len(out))
		}
	})
}

// FuzzHeartbeatBatchAnswer: the answer to a batch comes from a peer;
// decoding it must fail cleanly on anything malformed.
func FuzzHeartbeatBatchAnswer(f *testing.F) {
	cs := getCodec()
	cs.w.b = cs.w.b[:0]
	ok, _ := cs.encodeFrame(statusOK, &raft.AppendEntriesResponse{Term: 4, Success: true})
	f.Add(append([]byte{2}, append(append([]byte(nil), ok...), 0, 0, 0, 4, statusError, 'b', 'a', 'd')...))
	putCodec(cs)
	f.Add([]byte{2, 0, 0, 0, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		calls := []*hbCall{{resp: &raft.AppendEntriesResponse{}}, {resp: &raft.AppendEntriesResponse{}}}
		cs := getCodec()
		defer putCodec(cs)
		_ = readBatchAnswer(cs, body, calls, DefaultMaxFrameSize, errorForStatus)
	})
}
