package peer

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzDecodeRaftRequest: a raft request body comes off the peer port, which
// anyone who reaches it can write to. A malformed one is ErrBadFrame, never
// a panic or an allocation sized by a length the body does not hold.
func FuzzDecodeRaftRequest(f *testing.F) {
	cs := getCodec()
	for typ, v := range map[byte]any{
		typeAppendEntries: &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ID: []byte("1"), Addr: []byte("127.0.0.1:9124")}, Term: 3, PrevLogEntry: 9, PrevLogTerm: 2,
			Entries: []*raft.Log{{Index: 10, Term: 3, Type: raft.LogCommand, Data: []byte("batch")}}, LeaderCommitIndex: 9,
		},
		typeRequestVote:     &raft.RequestVoteRequest{Term: 4, LastLogIndex: 10, LastLogTerm: 3},
		typeRequestPreVote:  &raft.RequestPreVoteRequest{Term: 4},
		typeTimeoutNow:      &raft.TimeoutNowRequest{},
		typeInstallSnapshot: &raft.InstallSnapshotRequest{Term: 4, LastLogIndex: 100, Size: 1 << 20, Configuration: []byte{1, 2}},
	} {
		cs.w.b = cs.w.b[:0]
		frame, err := cs.encodeFrame(typ, v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(typ, append([]byte(nil), frame[5:]...))
	}
	putCodec(cs)
	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		cs := getCodec()
		defer putCodec(cs)
		if _, err := cs.decodeRequest(typ, body); err != nil && !errors.Is(err, ErrBadFrame) {
			t.Fatalf("error %v does not wrap ErrBadFrame", err)
		}
	})
}
