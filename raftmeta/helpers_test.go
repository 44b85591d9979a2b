package raftmeta

import (
	"testing"

	"github.com/fluss-node/fluss-node/proto/metapb"
	"google.golang.org/protobuf/proto"
)

func unmarshal(b []byte, m proto.Message) error { return proto.Unmarshal(b, m) }

func protoEqual(a, b proto.Message) bool { return proto.Equal(a, b) }

func stateWithoutIndex(t testing.TB, b []byte) *metapb.State {
	t.Helper()
	var s metapb.State
	if err := unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	s.AppliedIndex = 0
	return &s
}
