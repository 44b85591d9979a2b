package peer

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestFencedServerIsRefused: a Mux refuses every raft request whose sender
// it fences (unary, pipelined, heartbeats batched or not, snapshots), none
// reaches the group, and the refused node hears of it through OnFenced;
// requests from other servers, on the same streams, are served.
func TestFencedServerIsRefused(t *testing.T) {
	for _, batches := range []bool{true, false} {
		var (
			mu       sync.Mutex
			refusals []string
		)
		aOpts := testOpts()
		aOpts.NoHeartbeatBatches = !batches
		aOpts.OnFenced = func(remote, msg string) {
			mu.Lock()
			defer mu.Unlock()
			refusals = append(refusals, remote+": "+msg)
		}
		bOpts := testOpts()
		bOpts.Fenced = func(from raft.ServerID) bool { return from == "2" }
		a, err := Listen("127.0.0.1:0", aOpts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Listen("127.0.0.1:0", bOpts)
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		from, _ := a.Transport("g")
		to, _ := b.Transport("g")
		var delivered atomic.Int32
		to.SetHeartbeatHandler(func(rpc raft.RPC) {
			delivered.Add(1)
			rpc.Respond(&raft.AppendEntriesResponse{Term: 3, Success: true}, nil)
		})
		consume(t, to, func(rpc raft.RPC) {
			delivered.Add(1)
			switch req := rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true}, nil)
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: true}, nil)
			case *raft.InstallSnapshotRequest:
				rpc.Respond(&raft.InstallSnapshotResponse{Term: req.Term, Success: true}, nil)
			default:
				rpc.Respond(nil, errors.New("unexpected request"))
			}
		})
		target := raft.ServerAddress(b.Addr())
		header := func(id string) raft.RPCHeader {
			return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(a.Addr())}
		}
		heartbeat := func(id string) *raft.AppendEntriesRequest {
			return &raft.AppendEntriesRequest{RPCHeader: header(id), Term: 3}
		}
		appendReq := func(id string) *raft.AppendEntriesRequest {
			return &raft.AppendEntriesRequest{RPCHeader: header(id), Term: 3, PrevLogEntry: 1, PrevLogTerm: 1,
				Entries: []*raft.Log{{Index: 2, Term: 3, Type: raft.LogCommand, Data: []byte("x")}}}
		}
		snapshot := []byte("snapshot bytes")
		send := map[string]func(id string) error{
			"AppendEntries": func(id string) error {
				return from.AppendEntries("b", target, appendReq(id), &raft.AppendEntriesResponse{})
			},
			"heartbeat": func(id string) error {
				return from.AppendEntries("b", target, heartbeat(id), &raft.AppendEntriesResponse{})
			},
			"RequestVote": func(id string) error {
				return from.RequestVote("b", target, &raft.RequestVoteRequest{RPCHeader: header(id), Term: 4}, &raft.RequestVoteResponse{})
			},
			"InstallSnapshot": func(id string) error {
				req := &raft.InstallSnapshotRequest{RPCHeader: header(id), Term: 4, LastLogIndex: 9, LastLogTerm: 3, Size: int64(len(snapshot))}
				return from.InstallSnapshot("b", target, req, &raft.InstallSnapshotResponse{}, bytes.NewReader(snapshot))
			},
			"pipelined AppendEntries": func(id string) error {
				p, err := from.AppendEntriesPipeline("b", target)
				if err != nil {
					return err
				}
				defer p.Close()
				if _, err := p.AppendEntries(appendReq(id), &raft.AppendEntriesResponse{}); err != nil {
					return err
				}
				select {
				case f := <-p.Consumer():
					return f.Error()
				case <-time.After(5 * time.Second):
					return errors.New("no answer to the pipelined request")
				}
			},
		}
		for name, fn := range send {
			before := delivered.Load()
			err := fn("2")
			if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "refuses raft requests from server 2") {
				t.Fatalf("batches %v: %s from the fenced server: err = %v, want ErrFenced", batches, name, err)
			}
			if n := delivered.Load() - before; n != 0 {
				t.Fatalf("batches %v: %s from the fenced server reached the group %d times", batches, name, n)
			}
			if err := fn("3"); err != nil {
				t.Fatalf("batches %v: %s from another server, after the refusal: %v", batches, name, err)
			}
			if n := delivered.Load() - before; n != 1 {
				t.Fatalf("batches %v: %s from another server reached the group %d times, want once", batches, name, n)
			}
		}
		if n := b.FencedRequests(); n != int64(len(send)) {
			t.Fatalf("batches %v: %d requests counted refused, want %d", batches, n, len(send))
		}
		mu.Lock()
		if len(refusals) != len(send) || !strings.HasPrefix(refusals[0], b.Addr()+": ") {
			t.Fatalf("batches %v: OnFenced heard %q; want one refusal per request, from %s", batches, refusals, b.Addr())
		}
		mu.Unlock()
		from.Close()
		to.Close()
		a.Close()
		b.Close()
	}
}
