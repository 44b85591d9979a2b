package raftmeta

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// populated returns an FSM with 100 tables of 8 buckets in one database.
func populated(b *testing.B) *applier {
	a := newApplier(b)
	a.apply(cCreateDB("db", false))
	for i := range 100 {
		s := testSpec("db", fmt.Sprintf("t%03d", i))
		s.BucketCount = 8
		if res := a.apply(cCreateTable(b, s, false)); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	return a
}

func BenchmarkApplyCreateDropTable(b *testing.B) {
	a := populated(b)
	s := testSpec("db", "bench")
	s.BucketCount = 8
	create := mustEncode(b, cCreateTable(b, s, false))
	drop := mustEncode(b, cDropTable("db", "bench", false))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		idx := a.index + uint64(2*i)
		if r := a.f.Apply(&raft.Log{Index: idx + 1, Data: create}).(*ApplyResult); r.Err != nil {
			b.Fatal(r.Err)
		}
		if r := a.f.Apply(&raft.Log{Index: idx + 2, Data: drop}).(*ApplyResult); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

func BenchmarkTableByName(b *testing.B) {
	a := populated(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := a.f.TableByName("db", "t050"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAssignmentsForTable(b *testing.B) {
	a := populated(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if len(a.f.AssignmentsForTable(50)) != 8 {
			b.Fatal("wrong assignments")
		}
	}
}

func BenchmarkSnapshotPersist(b *testing.B) {
	a := populated(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, _ := a.f.Snapshot()
		var sink memSink
		if err := s.Persist(&sink); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCommand(b *testing.B) {
	data := mustEncode(b, cCreateTable(b, testSpec("db", "t"), false))
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if _, err := DecodeCommand(data); err != nil {
			b.Fatal(err)
		}
	}
}
