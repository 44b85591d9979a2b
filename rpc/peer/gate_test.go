package peer

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// gatePair returns two Muxes on loopback and group "g" on each (from on
// a, to on b), closed when the test ends.
func gatePair(t *testing.T) (a, b *Mux, from, to *Transport) {
	a, b = listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	t.Cleanup(func() { a.Close(); b.Close() })
	from, err := a.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	to, err = b.Transport("g")
	if err != nil {
		from.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { from.Close(); to.Close() })
	return a, b, from, to
}

// consume answers tr's requests with fn, as raft would, until the test
// ends.
func consume(t *testing.T, tr *Transport, fn func(rpc raft.RPC)) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case rpc := <-tr.Consumer():
				fn(rpc)
			case <-done:
				return
			}
		}
	}()
}

// TestGateTimeoutNow: a TimeoutNow the receiving group's gate refuses
// fails at the sender with the gate's reason and never reaches raft; once
// the gate admits, the next one on the same stream is delivered.
func TestGateTimeoutNow(t *testing.T) {
	_, b, from, to := gatePair(t)
	var err error

	var delivered atomic.Int32
	consume(t, to, func(rpc raft.RPC) {
		switch rpc.Command.(type) {
		case *raft.TimeoutNowRequest:
			delivered.Add(1)
			rpc.Respond(&raft.TimeoutNowResponse{RPCHeader: raft.RPCHeader{ID: []byte("b")}}, nil)
		case *raft.RequestVoteRequest:
			rpc.Respond(&raft.RequestVoteResponse{Term: 7}, nil)
		default:
			rpc.Respond(nil, errors.New("unexpected request"))
		}
	})

	var refuse atomic.Bool
	refuse.Store(true)
	to.GateTimeoutNow(func() error {
		if refuse.Load() {
			return errors.New("replica is a candidate")
		}
		return nil
	})
	target := raft.ServerAddress(b.Addr())
	var resp raft.TimeoutNowResponse
	err = from.TimeoutNow("b", target, &raft.TimeoutNowRequest{}, &resp)
	if err == nil || !strings.Contains(err.Error(), "replica is a candidate") {
		t.Fatalf("refused TimeoutNow: err = %v, want the gate's reason", err)
	}
	if n := delivered.Load(); n != 0 {
		t.Fatalf("a refused TimeoutNow reached raft %d times", n)
	}
	// Other requests pass the gate.
	var vote raft.RequestVoteResponse
	if err := from.RequestVote("b", target, &raft.RequestVoteRequest{Term: 7}, &vote); err != nil || vote.Term != 7 {
		t.Fatalf("RequestVote while TimeoutNow is refused: %v (answer term %d, want 7)", err, vote.Term)
	}

	refuse.Store(false)
	if err := from.TimeoutNow("b", target, &raft.TimeoutNowRequest{}, &resp); err != nil {
		t.Fatalf("admitted TimeoutNow: %v", err)
	}
	if n := delivered.Load(); n != 1 || string(resp.RPCHeader.ID) != "b" {
		t.Fatalf("admitted TimeoutNow: delivered %d times, answer from %q; want 1 and b", n, resp.RPCHeader.ID)
	}
}

// TestGateAppendAck: an AppendEntries answer raft accepted waits for the
// group's check and becomes the check's error when it fails; refusals,
// heartbeats and pipelined requests are handled as such.
func TestGateAppendAck(t *testing.T) {
	a, b, from, to := gatePair(t)
	var err error
	to.SetHeartbeatHandler(func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true}, nil) })

	// raft's side: accept every request whose PrevLogEntry is not 99.
	consume(t, to, func(rpc raft.RPC) {
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: req.PrevLogEntry != 99}, nil)
	})

	var checked []uint64 // last entry index of each checked request
	var fail atomic.Bool
	release := make(chan struct{}, 1)
	to.GateAppendAck(func(req *raft.AppendEntriesRequest) error {
		<-release
		checked = append(checked, req.Entries[len(req.Entries)-1].Index)
		if fail.Load() {
			return errors.New("log not durable")
		}
		return nil
	})
	target := raft.ServerAddress(b.Addr())
	hdr := raft.RPCHeader{Addr: []byte(a.Addr())}
	req := func(prev uint64) *raft.AppendEntriesRequest {
		return &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3, PrevLogEntry: prev, PrevLogTerm: 3,
			Entries: []*raft.Log{{Index: prev + 1, Term: 3, Type: raft.LogCommand, Data: []byte("x")}}}
	}

	// The answer waits for the check.
	answered := make(chan error, 1)
	var resp raft.AppendEntriesResponse
	go func() { answered <- from.AppendEntries("b", target, req(4), &resp) }()
	select {
	case err := <-answered:
		t.Fatalf("AppendEntries answered (%v) before the check passed", err)
	case <-time.After(100 * time.Millisecond):
	}
	release <- struct{}{}
	if err := <-answered; err != nil || !resp.Success {
		t.Fatalf("checked AppendEntries: %v, success %v", err, resp.Success)
	}

	// A failing check turns the acknowledgement into an error.
	fail.Store(true)
	release <- struct{}{}
	err = from.AppendEntries("b", target, req(5), &resp)
	if err == nil || !strings.Contains(err.Error(), "log not durable") {
		t.Fatalf("AppendEntries with a failing check: %v, want the check's error", err)
	}
	fail.Store(false)

	// A refusal and a heartbeat are answered without the check.
	if err := from.AppendEntries("b", target, req(99), &resp); err != nil || resp.Success {
		t.Fatalf("refused AppendEntries: %v, success %v; want a refusal", err, resp.Success)
	}
	hb := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3}
	if err := from.AppendEntries("b", target, hb, &resp); err != nil || !resp.Success {
		t.Fatalf("heartbeat: %v, success %v", err, resp.Success)
	}

	// Pipelined requests are checked too.
	p, err := from.AppendEntriesPipeline("b", target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	release <- struct{}{}
	if _, err := p.AppendEntries(req(6), new(raft.AppendEntriesResponse)); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-p.Consumer():
		if err := f.Error(); err != nil || !f.Response().Success {
			t.Fatalf("pipelined AppendEntries: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pipelined AppendEntries not answered")
	}
	if len(checked) != 3 || checked[0] != 5 || checked[1] != 6 || checked[2] != 7 {
		t.Fatalf("checked requests ending at %v, want [5 6 7]", checked)
	}
}

// TestGateWrites: AppendEntries carrying commands, and snapshots, that the
// receiving group's gate refuses fail at the sender with the gate's reason
// and never reach raft, pipelined or not; heartbeats and entries without
// commands pass; once the gate admits, the next request is delivered.
func TestGateWrites(t *testing.T) {
	a, b, from, to := gatePair(t)
	to.SetHeartbeatHandler(func(rpc raft.RPC) { rpc.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true}, nil) })
	var delivered atomic.Int32
	consume(t, to, func(rpc raft.RPC) {
		delivered.Add(1)
		switch rpc.Command.(type) {
		case *raft.InstallSnapshotRequest:
			io.Copy(io.Discard, rpc.Reader)
			rpc.Respond(&raft.InstallSnapshotResponse{Term: 3, Success: true}, nil)
		default:
			rpc.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true}, nil)
		}
	})
	var refuse atomic.Bool
	refuse.Store(true)
	to.GateWrites(func() error {
		if refuse.Load() {
			return errors.New("disk nearly full")
		}
		return nil
	})
	target := raft.ServerAddress(b.Addr())
	hdr := raft.RPCHeader{Addr: []byte(a.Addr())}
	entries := func(types ...raft.LogType) *raft.AppendEntriesRequest {
		req := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3, PrevLogEntry: 4, PrevLogTerm: 3}
		for i, typ := range types {
			req.Entries = append(req.Entries, &raft.Log{Index: uint64(5 + i), Term: 3, Type: typ, Data: []byte("x")})
		}
		return req
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "disk nearly full") {
			t.Fatalf("%s: err = %v, want the gate's reason", what, err)
		}
	}
	var resp raft.AppendEntriesResponse
	refused("AppendEntries with a command", from.AppendEntries("b", target, entries(raft.LogNoop, raft.LogCommand), &resp))
	p, err := from.AppendEntriesPipeline("b", target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f, err := p.AppendEntries(entries(raft.LogCommand), &resp)
	if err == nil {
		err = f.Error()
	}
	refused("pipelined AppendEntries with a command", err)
	snap := bytes.Repeat([]byte("s"), 1<<20)
	var sresp raft.InstallSnapshotResponse
	refused("InstallSnapshot", from.InstallSnapshot("b", target, &raft.InstallSnapshotRequest{RPCHeader: hdr, Term: 3, Size: int64(len(snap))}, &sresp, bytes.NewReader(snap)))
	if n := delivered.Load(); n != 0 {
		t.Fatalf("refused requests reached raft %d times", n)
	}

	if err := from.AppendEntries("b", target, entries(raft.LogConfiguration, raft.LogNoop), &resp); err != nil || !resp.Success {
		t.Fatalf("entries without commands while refusing: %v, success %v", err, resp.Success)
	}
	hb := &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 3}
	if err := from.AppendEntries("b", target, hb, &resp); err != nil || !resp.Success {
		t.Fatalf("heartbeat while refusing: %v, success %v", err, resp.Success)
	}
	if n := delivered.Load(); n != 1 {
		t.Fatalf("%d requests reached raft, want the one without commands", n)
	}

	refuse.Store(false)
	if err := from.AppendEntries("b", target, entries(raft.LogCommand), &resp); err != nil || !resp.Success {
		t.Fatalf("admitted AppendEntries: %v, success %v", err, resp.Success)
	}
	if err := from.InstallSnapshot("b", target, &raft.InstallSnapshotRequest{RPCHeader: hdr, Term: 3, Size: int64(len(snap))}, &sresp, bytes.NewReader(snap)); err != nil || !sresp.Success {
		t.Fatalf("admitted InstallSnapshot: %v, success %v", err, sresp.Success)
	}
	if n := delivered.Load(); n != 3 {
		t.Fatalf("%d requests reached raft, want 3", n)
	}
}

// TestCloseWaitsForRunningHeartbeats: raft's heartbeat handler runs on the
// transport's goroutine, so Close (which raft calls at the end of its
// shutdown, before the node closes the group's stores) waits for a running
// one, and after Close no heartbeat reaches it.
func TestCloseWaitsForRunningHeartbeats(t *testing.T) {
	_, b, from, to := gatePair(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	to.SetHeartbeatHandler(func(rpc raft.RPC) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true}, nil)
	})
	target := raft.ServerAddress(b.Addr())
	hb := func() error {
		return from.AppendEntries("b", target, &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("a")}, Term: 3}, &raft.AppendEntriesResponse{})
	}
	go hb()
	<-entered
	closed := make(chan struct{})
	go func() { to.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a heartbeat handler ran")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return once the handler did")
	}
	if err := hb(); err == nil {
		t.Fatal("a heartbeat after Close was answered")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once (none after Close)", n)
	}
}
