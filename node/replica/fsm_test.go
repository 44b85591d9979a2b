package replica

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore/record"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the random FSM tests (0: random)")

func TestHeaderOffsetsMatchRecord(t *testing.T) {
	h := record.BatchHeader{BaseOffset: 1<<40 + 3, RecordCount: 77, CommitTimestamp: 1<<41 + 5, WriterID: -9, BatchSequence: 123456, SchemaID: 4}
	b := record.AppendBatch(nil, h, nil, []byte("body"))
	got, n, err := peekBatch(b)
	if err != nil || n != len(b) {
		t.Fatalf("peekBatch: n %d err %v", n, err)
	}
	want := batchHeader{Base: h.BaseOffset, Count: h.RecordCount, CommitTs: h.CommitTimestamp, WriterID: h.WriterID, Seq: h.BatchSequence, SchemaID: h.SchemaID}
	if got != want {
		t.Fatalf("peekBatch %+v, want %+v", got, want)
	}
	stampBatch(b, 5, 6, 7, 8)
	bt, _, err := record.ParseBatch(b)
	if err != nil {
		t.Fatalf("stamped batch does not parse: %v", err)
	}
	if bt.BaseOffset != 5 || bt.CommitTimestamp != 6 || bt.WriterID != 7 || bt.BatchSequence != 8 || bt.SchemaID != 4 || string(bt.Body) != "body" {
		t.Fatalf("stamped batch %+v", bt.BatchHeader)
	}
}

// entry builds a raft log entry holding batches of the given counts,
// stamped from base with commit time ts for writer w / seq s.
func entry(index uint64, base, ts int64, w int64, s int32, counts ...int32) *raft.Log {
	data := []byte{cmdAppend}
	for _, c := range counts {
		start := len(data)
		data = append(data, makeBatch(c, "x")...)
		stampBatch(data[start:], base, ts, w, s)
		base += int64(c)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func TestEntryOffsets(t *testing.T) {
	tests := []struct {
		name  string
		l     *raft.Log
		base  int64
		count int32
		ts    int64
		ok    bool
	}{
		{"one batch", entry(1, 10, 100, 0, 0, 4), 10, 4, 100, true},
		{"three batches", entry(2, 0, 5, 1, 1, 1, 2, 3), 0, 6, 5, true},
		{"noop", &raft.Log{Type: raft.LogNoop}, 0, 0, 0, false},
		{"configuration", &raft.Log{Type: raft.LogConfiguration, Data: []byte{1, 2, 3}}, 0, 0, 0, false},
		{"empty command", &raft.Log{Type: raft.LogCommand, Data: []byte{cmdAppend}}, 0, 0, 0, false},
		{"unknown command", &raft.Log{Type: raft.LogCommand, Data: append([]byte{9}, entry(1, 0, 0, 0, 0, 1).Data[1:]...)}, 0, 0, 0, false},
		{"truncated", &raft.Log{Type: raft.LogCommand, Data: entry(1, 0, 0, 0, 0, 1).Data[:30]}, 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, count, ts, ok := EntryOffsets(tt.l)
			if base != tt.base || count != tt.count || ts != tt.ts || ok != tt.ok {
				t.Fatalf("EntryOffsets = (%d,%d,%d,%v), want (%d,%d,%d,%v)", base, count, ts, ok, tt.base, tt.count, tt.ts, tt.ok)
			}
		})
	}
}

func snapBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return s.(*fsmSnapshot).data
}

func TestFSMWriterTable(t *testing.T) {
	f := newFSM()
	var next int64
	idx := uint64(0)
	apply := func(w int64, s int32, counts ...int32) {
		idx++
		l := entry(idx, next, 1000, w, s, counts...)
		f.ApplyBatch([]*raft.Log{l})
		for _, c := range counts {
			next += int64(c)
		}
	}
	for s := int32(0); s < 8; s++ {
		apply(3, s, 2, 1) // one request of two batches
	}
	apply(0, 0, 5)
	apply(3, 2, 1) // a duplicate the leader should have dropped: data kept, table unchanged
	if hw := f.HighWatermark(); hw != next || hw != 8*3+5+1 {
		t.Fatalf("hw %d, want %d", hw, next)
	}
	_, _, writers := f.view()
	got := writers[3]
	if len(got) != WriterWindow {
		t.Fatalf("writer window %v, want %d entries", got, WriterWindow)
	}
	for i, r := range got {
		s := int32(3 + i)
		if r != (SeqResult{Seq: s, Base: int64(s) * 3, Count: 3}) {
			t.Fatalf("window[%d] = %+v", i, r)
		}
	}
	if _, ok := writers[0]; ok {
		t.Fatal("writer 0 must not be tracked")
	}
}

func TestFSMPanicsOnDivergence(t *testing.T) {
	tests := []struct {
		name string
		l    *raft.Log
		want string
	}{
		{"offset gap", entry(1, 5, 1, 0, 0, 1), "base offset 5 != next offset 0"},
		{"unknown command", &raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{42}}, "unknown command 42"},
		{"garbage", &raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{cmdAppend, 1, 2}}, "undecodable entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(fmt.Sprint(p), tt.want) {
					t.Fatalf("panic %v, want one mentioning %q", p, tt.want)
				}
			}()
			newFSM().ApplyBatch([]*raft.Log{tt.l})
		})
	}
}

// randomEntries generates a valid random log: appends from a few writers
// (with duplicates), configuration entries, and commit times that jump past
// the writer expiry.
func randomEntries(rng *rand.Rand, n int) []*raft.Log {
	var out []*raft.Log
	var next, ts int64 = 0, 1_000
	for i := 1; i <= n; i++ {
		if rng.IntN(10) == 0 {
			out = append(out, &raft.Log{Index: uint64(i), Type: raft.LogConfiguration, Data: []byte{byte(i)}})
			continue
		}
		ts += rng.Int64N(3_600_000)
		if rng.IntN(50) == 0 {
			ts += WriterExpiryMs
		}
		w := rng.Int64N(6)
		s := int32(i - rng.IntN(3)) // occasional duplicates of a recent seq
		counts := make([]int32, 1+rng.IntN(3))
		var sum int64
		for j := range counts {
			counts[j] = int32(rng.IntN(5))
			sum += int64(counts[j])
		}
		out = append(out, entry(uint64(i), next, ts, w, s, counts...))
		next += sum
	}
	// End with a writer that must be tracked.
	return append(out, entry(uint64(n+1), next, ts, 1, 1<<30, 1))
}

func TestFSMReplayDeterminism(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	logs := randomEntries(rng, 2000)

	a, b := newFSM(), newFSM()
	for _, l := range logs {
		a.Apply(l)
	}
	var mid []byte
	for i := 0; i < len(logs); {
		n := 1 + rng.IntN(64)
		n = min(n, len(logs)-i)
		b.ApplyBatch(logs[i : i+n])
		i += n
		if mid == nil && i >= len(logs)/2 {
			mid = snapBytes(t, b)
			// Finish the rest on a third FSM restored from the midway snapshot.
			c := newFSM()
			if err := c.Restore(io.NopCloser(bytes.NewReader(mid))); err != nil {
				t.Fatal(err)
			}
			c.ApplyBatch(logs[i:])
			if !bytes.Equal(snapBytes(t, c), snapBytes(t, a)) {
				t.Fatalf("restored-midway FSM differs from straight replay")
			}
		}
	}
	sa, sb := snapBytes(t, a), snapBytes(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatal("same entries, different snapshots")
	}
	st, err := decodeState(sa)
	if err != nil {
		t.Fatal(err)
	}
	if st.AppliedIndex != uint64(len(logs)) || st.NextOffset != a.HighWatermark() || st.NextOffset == 0 {
		t.Fatalf("state %+v after %d entries", st, len(logs))
	}
	if w := st.Writers[1]; w == nil || w.Results[len(w.Results)-1].Seq != 1<<30 {
		t.Fatalf("last writer not tracked: %+v", w)
	}
}

func TestSnapshotCorruption(t *testing.T) {
	f := newFSM()
	f.ApplyBatch([]*raft.Log{entry(1, 0, 10, 4, 1, 3), entry(2, 3, 11, 5, 1, 2)})
	good := snapBytes(t, f)
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		if _, err := decodeState(bad); err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
	for n := 0; n < len(good); n++ {
		if _, err := decodeState(good[:n]); err == nil {
			t.Fatalf("truncation to %d accepted", n)
		}
	}
	g := newFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(good[:len(good)-1]))); err == nil {
		t.Fatal("Restore accepted a truncated snapshot")
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader(good))); err != nil || g.HighWatermark() != 5 {
		t.Fatalf("Restore: hw %d err %v", g.HighWatermark(), err)
	}
}

func FuzzDecodeSnapshot(f *testing.F) {
	fsm := newFSM()
	fsm.ApplyBatch([]*raft.Log{entry(1, 0, 10, 4, 1, 3), entry(2, 3, 11, 5, 1, 2)})
	f.Add(appendState(nil, &fsm.st))
	f.Add(appendState(nil, &newFSM().st))
	f.Add([]byte("FRS1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		if again := appendState(nil, &st); !bytes.Equal(again, b) {
			t.Fatalf("decode/encode not the identity")
		}
	})
}

func FuzzEntryOffsets(f *testing.F) {
	f.Add(entry(1, 0, 10, 4, 1, 3, 2).Data)
	f.Add([]byte{cmdAppend})
	f.Add([]byte{cmdAppend, 0xFB, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		l := &raft.Log{Type: raft.LogCommand, Data: data}
		base, count, _, ok := EntryOffsets(l)
		if !ok {
			return
		}
		var sum int64
		if err := forEachBatch(data[1:], func(h batchHeader, _ []byte) error { sum += int64(h.Count); return nil }); err != nil {
			t.Fatalf("EntryOffsets ok but batches do not parse: %v", err)
		}
		if int64(count) != int64(int32(sum)) || len(data) < 1+56 {
			t.Fatalf("count %d, batches sum %d", count, sum)
		}
		if h, _, _ := peekBatch(data[1:]); h.Base != base {
			t.Fatalf("base %d, first batch at %d", base, h.Base)
		}
	})
}

func TestPruneViewKeepsLiveAndInflightWriters(t *testing.T) {
	r := &Replica{fsm: newFSM()}
	r.fsm.ApplyBatch([]*raft.Log{entry(1, 0, 10, 2, 1, 1)})
	tm := newTerm(r)
	inflightReq := &appendReq{}
	tm.view = map[int64][]*viewSeq{
		1: {{SeqResult: SeqResult{Seq: 1}}},                   // expired by the FSM, idle: dropped
		2: {{SeqResult: SeqResult{Seq: 1}}},                   // tracked by the FSM: kept
		3: {{SeqResult: SeqResult{Seq: 4}, req: inflightReq}}, // in flight: kept
	}
	tm.pruneView()
	if _, ok := tm.view[1]; ok || len(tm.view) != 2 || tm.view[2] == nil || tm.view[3] == nil {
		t.Fatalf("view after prune has writers %v", tm.view)
	}
}
