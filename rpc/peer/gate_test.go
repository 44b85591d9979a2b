package peer

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"
)

// TestGateTimeoutNow: a TimeoutNow the receiving group's gate refuses
// fails at the sender with the gate's reason and never reaches raft; once
// the gate admits, the next one on the same stream is delivered.
func TestGateTimeoutNow(t *testing.T) {
	a, b := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	defer a.Close()
	defer b.Close()
	from, err := a.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	to, err := b.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()

	var delivered atomic.Int32
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case rpc := <-to.Consumer():
				switch rpc.Command.(type) {
				case *raft.TimeoutNowRequest:
					delivered.Add(1)
					rpc.Respond(&raft.TimeoutNowResponse{RPCHeader: raft.RPCHeader{ID: []byte("b")}}, nil)
				case *raft.RequestVoteRequest:
					rpc.Respond(&raft.RequestVoteResponse{Term: 7}, nil)
				default:
					rpc.Respond(nil, errors.New("unexpected request"))
				}
			case <-done:
				return
			}
		}
	}()

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
