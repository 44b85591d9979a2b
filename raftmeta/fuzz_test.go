package raftmeta

import (
	"errors"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/proto/metapb"
	"github.com/hashicorp/raft"
)

// FuzzApply fuzzes the command decoder: it must never panic, and every
// command it accepts must apply (against an empty and a populated catalog)
// without panicking, since Apply panics only on what DecodeCommand rejects.
func FuzzApply(f *testing.F) {
	seeds := []*metapb.Command{
		cCreateDB("db", false),
		cDropDB("db", true, true),
		cCreateTable(f, testSpec("db", "t"), false),
		cCreateTable(f, partitionedSpec("db", "p"), true),
		cDropTable("db", "t", false),
		cCreatePartition(f, 2, 2, "x", false),
		cDropPartition(2, "x", true),
		cSetAssign(Assignment{BucketID: BucketID{TableID: 1}, Replicas: []NodeID{1, 2}}),
		cRegister(1, NodeActive),
		cNodeState(1, NodeLeft),
		cClusterID("c", true),
		cAddColumns(1, record.Column{Name: "n", Type: record.Type{Kind: record.KindDecimal, Precision: 10, Scale: 2}, Nullable: true}),
		cSetProps(1, map[string]string{"table.log.ttl": "1d"}, "owner"),
		cForget(1),
		cClusterConfig(ClusterConfig{MetaVoters: 3, DeadNodeGrace: time.Minute}, true),
		{Cmd: &metapb.Command_FenceNodes{FenceNodes: &metapb.FenceNodes{Ids: []int32{2, 3}}}},
	}
	for _, s := range seeds {
		f.Add(mustEncode(f, s))
	}
	f.Add([]byte{})
	f.Add([]byte{0x1a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := DecodeCommand(data)
		if err != nil {
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("error %v does not wrap ErrBadCommand", err)
			}
			return
		}
		if cmd.Cmd == nil {
			t.Fatal("accepted a command without a body")
		}
		empty := NewFSM()
		empty.Apply(&raft.Log{Index: 1, Data: data})
		a := newApplier(t)
		a.apply(cCreateDB("db", false))
		a.apply(cCreateTable(t, testSpec("db", "t"), false))
		a.apply(cCreateTable(t, partitionedSpec("db", "p"), false))
		a.apply(cCreatePartition(t, 2, 2, "x", false))
		a.apply(cRegister(1, NodeActive))
		a.f.Apply(&raft.Log{Index: 100, Data: data})
		if _, err := a.f.MarshalState(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDecodeState fuzzes the snapshot decoder.
func FuzzDecodeState(f *testing.F) {
	a := newApplier(f)
	a.apply(cCreateDB("db", false))
	a.apply(cCreateTable(f, testSpec("db", "t"), false))
	a.apply(cCreateTable(f, partitionedSpec("db", "p"), false))
	a.apply(cCreatePartition(f, 2, 2, "x", false))
	a.apply(cRegister(1, NodeActive))
	a.apply(cClusterConfig(ClusterConfig{MetaVoters: 5, DeadNodeGrace: time.Hour}, false))
	snap, err := a.f.MarshalState()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(snap)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			if !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("error %v does not wrap ErrBadSnapshot", err)
			}
			return
		}
		_ = st.toPB()
	})
}
