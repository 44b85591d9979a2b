package kvstore

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openTestStore(t testing.TB) *Store {
	t.Helper()
	st, err := Open(t.TempDir(), DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st
}

// dump returns every (key, value) of the replica's rows in key order.
func dump(t testing.TB, r *Replica) [][2]string {
	t.Helper()
	var out [][2]string
	if err := r.PrefixScan(nil, func(k, v []byte) error {
		out = append(out, [2]string{string(k), string(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func kvSchemaCodec(t testing.TB) *Codec {
	s := mkSchema(t, []string{"id"}, "id BIGINT NOT NULL", "name STRING", "n BIGINT")
	c, err := NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func key(t testing.TB, c *Codec, id int64) []byte {
	k, err := c.AppendKey(nil, Row{Int(id), Null(), Null()})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestApplyAtomicWithIndex(t *testing.T) {
	st := openTestStore(t)
	c := kvSchemaCodec(t)
	r := st.Replica(1, c)
	other := st.Replica(2, c)
	if idx, err := r.AppliedIndex(); err != nil || idx != 0 {
		t.Fatalf("fresh AppliedIndex = %d, %v", idx, err)
	}
	batch := []Change{
		{Insert, Row{Int(1), Str("a"), Int(1)}},
		{Insert, Row{Int(2), Str("b"), Int(2)}},
		{UpdateBefore, Row{Int(1), Str("a"), Int(1)}},
		{UpdateAfter, Row{Int(1), Str("a2"), Int(3)}},
	}
	if err := r.Apply(batch, 5); err != nil {
		t.Fatal(err)
	}
	if idx, _ := r.AppliedIndex(); idx != 5 {
		t.Fatalf("AppliedIndex = %d, want 5", idx)
	}
	row, ok, err := r.Get(key(t, c, 1))
	if err != nil || !ok || fmtRow(c.Schema(), row) != `(1,"a2",3)` {
		t.Fatalf("Get(1) = %s %v %v", fmtRow(c.Schema(), row), ok, err)
	}
	if _, ok, _ := other.Get(key(t, c, 1)); ok {
		t.Fatal("replica 2 sees replica 1's row")
	}

	// A batch with a bad change (NULL key) in the middle writes nothing, and
	// the applied index does not move.
	bad := []Change{
		{Delete, Row{Int(2), Null(), Null()}},
		{Insert, Row{Null(), Str("x"), Null()}},
	}
	if err := r.Apply(bad, 6); !errors.Is(err, ErrNullKey) {
		t.Fatalf("bad batch: %v", err)
	}
	if idx, _ := r.AppliedIndex(); idx != 5 {
		t.Fatalf("AppliedIndex after failed apply = %d, want 5", idx)
	}
	if _, ok, _ := r.Get(key(t, c, 2)); !ok {
		t.Fatal("failed batch deleted row 2")
	}

	// Replaying an already applied index is a no-op.
	if err := r.Apply([]Change{{Delete, Row{Int(1), Null(), Null()}}}, 5); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.Get(key(t, c, 1)); !ok {
		t.Fatal("replayed index 5 was applied again")
	}
	if err := r.Apply([]Change{{Delete, Row{Int(1), Null(), Null()}}}, 7); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.Get(key(t, c, 1)); ok {
		t.Fatal("delete at index 7 not applied")
	}
	if got := dump(t, r); len(got) != 1 {
		t.Fatalf("%d rows left, want 1", len(got))
	}
}

// AppendValues answers many keys from one read view: found keys get their
// stored value, missing ones nil, and values stay intact as dst grows.
func TestAppendValues(t *testing.T) {
	st := openTestStore(t)
	c := kvSchemaCodec(t)
	r := st.Replica(1, c)
	var batch []Change
	for id := int64(0); id < 100; id += 2 {
		batch = append(batch, Change{Insert, Row{Int(id), Str(strings.Repeat("v", int(id))), Int(id * 10)}})
	}
	if err := r.Apply(batch, 1); err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for id := int64(99); id >= 0; id-- {
		keys = append(keys, key(t, c, id))
	}
	vals := make([][]byte, len(keys))
	// A small dst forces several grows while the values are appended.
	if _, err := r.AppendValues(make([]byte, 0, 8), keys, vals, 0); err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		id := int64(99 - i)
		if id%2 == 1 {
			if v != nil {
				t.Fatalf("key %d has no row but got %q", id, v)
			}
			continue
		}
		row, err := c.DecodeRow(nil, v)
		if err != nil {
			t.Fatalf("key %d: %v", id, err)
		}
		want := fmt.Sprintf("(%d,%q,%d)", id, strings.Repeat("v", int(id)), id*10)
		if got := fmtRow(c.Schema(), row); got != want {
			t.Fatalf("key %d = %s, want %s", id, got, want)
		}
	}
	if _, ok, err := r.AppendValue(nil, key(t, c, 3)); ok || err != nil {
		t.Fatalf("AppendValue of a missing key: ok=%v err=%v", ok, err)
	}
	// A budget: the exact total of the values fits, a byte less does not.
	total := 0
	for _, v := range vals {
		total += len(v)
	}
	if _, err := r.AppendValues(nil, keys, vals, total); err != nil {
		t.Fatalf("AppendValues within a budget of exactly %d bytes: %v", total, err)
	}
	if _, err := r.AppendValues(nil, keys, vals, total-1); !errors.Is(err, ErrOverBudget) {
		t.Fatalf("AppendValues over a budget of %d bytes: %v, want ErrOverBudget", total-1, err)
	}
}

func TestApplySurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	c := kvSchemaCodec(t)
	st, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Replica(3, c).Apply([]Change{{Insert, Row{Int(1), Str("a"), Int(1)}}}, 9); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := st.Replica(3, c)
	if idx, _ := r.AppliedIndex(); idx != 9 {
		t.Fatalf("AppliedIndex after reopen = %d", idx)
	}
	if _, ok, _ := r.Get(key(t, c, 1)); !ok {
		t.Fatal("row lost across reopen")
	}
}

func TestSnapshotRestoreDrop(t *testing.T) {
	st := openTestStore(t)
	c := kvSchemaCodec(t)
	src, dst, bystander := st.Replica(10, c), st.Replica(11, c), st.Replica(12, c)
	var batch []Change
	for i := int64(0); i < 500; i++ {
		batch = append(batch, Change{Insert, Row{Int(i), Str(fmt.Sprintf("name-%d", i)), Int(i * i)}})
	}
	if err := src.Apply(batch, 42); err != nil {
		t.Fatal(err)
	}
	if err := dst.Apply([]Change{{Insert, Row{Int(9999), Str("stale"), Null()}}}, 100); err != nil {
		t.Fatal(err)
	}
	if err := bystander.Apply(batch[:10], 3); err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := src.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}

	// A corrupted stream is rejected before anything is touched.
	for _, mut := range []func([]byte) []byte{
		func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		func(b []byte) []byte { return b[:len(b)-1] },
		func(b []byte) []byte { return b[:3] },
	} {
		bad := mut(bytes.Clone(snap.Bytes()))
		if err := dst.Restore(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupt restore: %v", err)
		}
		if idx, _ := dst.AppliedIndex(); idx != 100 {
			t.Fatalf("corrupt restore touched dst (index %d)", idx)
		}
	}

	if err := dst.Restore(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	want, got := dump(t, src), dump(t, dst)
	if len(want) != 500 || fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("restored scan differs: %d vs %d rows", len(want), len(got))
	}
	if idx, _ := dst.AppliedIndex(); idx != 42 {
		t.Fatalf("restored AppliedIndex = %d, want 42", idx)
	}
	var snap2 bytes.Buffer
	if err := dst.Snapshot(&snap2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap.Bytes(), snap2.Bytes()) {
		t.Fatal("snapshot of the restored replica is not byte-identical")
	}

	if err := src.Drop(); err != nil {
		t.Fatal(err)
	}
	if n := len(dump(t, src)); n != 0 {
		t.Fatalf("%d rows after Drop", n)
	}
	if idx, _ := src.AppliedIndex(); idx != 0 {
		t.Fatalf("AppliedIndex after Drop = %d", idx)
	}
	if n := len(dump(t, bystander)); n != 10 {
		t.Fatalf("bystander has %d rows, want 10", n)
	}
	if n := len(dump(t, dst)); n != 500 {
		t.Fatalf("dst has %d rows after dropping src", n)
	}
}

func TestPreWriteBuffer(t *testing.T) {
	st := openTestStore(t)
	c := kvSchemaCodec(t)
	r := st.Replica(1, c)
	if err := r.Apply([]Change{{Insert, Row{Int(1), Str("stored"), Null()}}}, 1); err != nil {
		t.Fatal(err)
	}
	b := NewPreWriteBuffer()
	k1, k2 := key(t, c, 1), key(t, c, 2)
	lookup := func(k []byte) string {
		row, err := b.Lookup(r, k)
		if err != nil {
			t.Fatal(err)
		}
		return fmtRow(c.Schema(), row)
	}
	if got := lookup(k1); got != `(1,"stored",NULL)` {
		t.Fatalf("lookup through to store = %s", got)
	}
	b.Put(k1, Row{Int(1), Str("pending"), Null()}, 2)
	b.Put(k2, Row{Int(2), Str("new"), Null()}, 3)
	if got := lookup(k1); got != `(1,"pending",NULL)` {
		t.Fatalf("pending overlay = %s", got)
	}
	b.Delete(k1, 4)
	if got := lookup(k1); got != `<nil>` {
		t.Fatalf("pending delete = %s", got)
	}
	b.Applied(3) // k2 applied; k1's latest proposal (4) is not
	if _, ok := b.Get(k2); ok || b.Len() != 1 {
		t.Fatalf("Applied(3) left k2 (len %d)", b.Len())
	}
	if got := lookup(k1); got != `<nil>` {
		t.Fatalf("k1 lost its pending delete: %s", got)
	}
	b.Reset()
	if b.Len() != 0 || lookup(k1) != `(1,"stored",NULL)` {
		t.Fatal("Reset did not drop the buffer")
	}
}

var seedFlag = flag.Uint64("seed", 0, "seed for TestRandomWorkload (0: time-based)")

// TestRandomWorkload runs a seeded stream of upserts, partial updates and
// deletes through the leader path (PreWriteBuffer lookup, Merger, batches
// applied with increasing indexes, some lagging), then replays every emitted
// changelog entry from empty into a second replica and checks the two stores
// are byte-identical, and that the live state matches a model that folds
// the changelog into a map.
func TestRandomWorkload(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := mkSchema(t, []string{"id"}, "id BIGINT NOT NULL", "tag STRING", "total BIGINT", "hi INT")
	c, err := NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, props := range []map[string]string{
		{},
		{PropChangelogImage: "WAL"},
		{PropMergeEngine: "aggregation", PropDeleteBehavior: "allow", "fields.tag.agg": "listagg", "fields.total.agg": "sum", "fields.hi.agg": "max"},
		{PropMergeEngine: "first_row"},
		{PropMergeEngine: "versioned", PropVerColumn: "hi"},
	} {
		t.Run(fmt.Sprint(props), func(t *testing.T) {
			m, err := NewMerger(s, props)
			if err != nil {
				t.Fatal(err)
			}
			st := openTestStore(t)
			live, replay := st.Replica(1, c), st.Replica(2, c)
			buf := NewPreWriteBuffer()
			var all []Change
			var pending [][]Change
			index := uint64(0)
			model := map[string]string{}
			truth := map[string]string{} // the leader's intended state, updated at merge time
			for step := 0; step < 400; step++ {
				var batch []Change
				for n := 1 + rng.IntN(8); n > 0; n-- {
					id := int64(rng.IntN(30))
					k, _ := c.AppendKey(nil, Row{Int(id), Null(), Null(), Null()})
					old, err := buf.Lookup(live, k)
					if err != nil {
						t.Fatal(err)
					}
					var nw Row
					before := len(batch)
					switch op := rng.IntN(10); {
					case op < 2:
						var target []int
						if op == 1 && rng.IntN(2) == 0 {
							target = []int{0, 1 + rng.IntN(3)}
						}
						nw, batch, err = m.Delete(batch, old, target)
					default:
						in := Row{Int(id), Str(fmt.Sprint(rng.IntN(5))), Int(int64(rng.IntN(100))), Int(int64(rng.IntN(50)))}
						if rng.IntN(4) == 0 {
							in[1] = Null()
						}
						var target []int
						if op < 4 && m.Engine() != EngineFirstRow && m.Engine() != EngineVersioned {
							target = []int{0, 2}
						}
						nw, batch, err = m.Upsert(batch, old, in, target)
					}
					if err != nil {
						t.Fatal(err)
					}
					if len(batch) == before {
						continue // no change: nothing proposed
					}
					if nw == nil {
						buf.Delete(k, index+1)
						delete(truth, string(k))
					} else {
						buf.Put(k, nw, index+1)
						vb, _ := c.AppendRow(nil, nw)
						truth[string(k)] = string(vb)
					}
				}
				if len(batch) == 0 {
					continue
				}
				index++
				pending = append(pending, batch)
				all = append(all, batch...)
				// Apply lags proposals by up to 3 batches, as Raft commit does.
				for len(pending) > rng.IntN(4) {
					applyIdx := index - uint64(len(pending)) + 1
					if err := live.Apply(pending[0], applyIdx); err != nil {
						t.Fatal(err)
					}
					buf.Applied(applyIdx)
					pending = pending[1:]
				}
			}
			for len(pending) > 0 {
				applyIdx := index - uint64(len(pending)) + 1
				if err := live.Apply(pending[0], applyIdx); err != nil {
					t.Fatal(err)
				}
				buf.Applied(applyIdx)
				pending = pending[1:]
			}
			if buf.Len() != 0 {
				t.Fatalf("pre-write buffer holds %d keys after everything applied", buf.Len())
			}
			// Replay the whole changelog from empty, one change per index.
			for i, ch := range all {
				if err := replay.Apply([]Change{ch}, uint64(i+1)); err != nil {
					t.Fatal(err)
				}
				kb, _ := c.AppendKey(nil, ch.Row)
				switch ch.Type {
				case Insert, UpdateAfter:
					vb, _ := c.AppendRow(nil, ch.Row)
					model[string(kb)] = string(vb)
				case Delete, UpdateBefore:
					// The before image is exactly the row the changelog left there.
					vb, _ := c.AppendRow(nil, ch.Row)
					if cur, ok := model[string(kb)]; !ok || cur != string(vb) {
						t.Fatalf("change %d: %v before image %s does not match the current row", i, ch.Type, fmtRow(s, ch.Row))
					}
					if ch.Type == Delete {
						delete(model, string(kb))
					}
				}
			}
			a, b := dump(t, live), dump(t, replay)
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("replayed store differs from live store (%d vs %d rows)", len(a), len(b))
			}
			if len(a) != len(model) {
				t.Fatalf("store has %d rows, model %d", len(a), len(model))
			}
			if len(a) != len(truth) {
				t.Fatalf("store has %d rows, leader's merged state %d", len(a), len(truth))
			}
			for _, e := range a {
				if model[e[0]] != e[1] || truth[e[0]] != e[1] {
					t.Fatalf("key %x: store, changelog model and leader state differ", e[0])
				}
			}
			if m.Engine() == EngineFirstRow {
				for _, ch := range all {
					if ch.Type != Insert {
						t.Fatalf("first_row emitted %v", ch.Type)
					}
				}
			}
			t.Logf("%d changes, %d rows", len(all), len(a))
		})
	}
}

// TestSnapshotIsPointInTime: a Snapshot taken before later Applies streams
// the state as of when it was taken (the hashicorp Snapshot/Persist split).
func TestSnapshotIsPointInTime(t *testing.T) {
	st := openTestStore(t)
	c := kvSchemaCodec(t)
	r, r2 := st.Replica(1, c), st.Replica(2, c)
	if err := r.Apply([]Change{{Insert, Row{Int(1), Str("a"), Null()}}}, 1); err != nil {
		t.Fatal(err)
	}
	snap := r.NewSnapshot()
	if err := r.Apply([]Change{{Delete, Row{Int(1), Null(), Null()}}, {Insert, Row{Int(2), Str("b"), Null()}}}, 2); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := snap.WriteTo(&buf)
	snap.Release()
	snap.Release()
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v (buffer %d)", n, err, buf.Len())
	}
	if _, err := snap.WriteTo(&buf); err == nil {
		t.Fatal("WriteTo after Release succeeded")
	}
	if err := r2.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if idx, _ := r2.AppliedIndex(); idx != 1 {
		t.Fatalf("restored index %d, want 1", idx)
	}
	if _, ok, _ := r2.Get(key(t, c, 1)); !ok {
		t.Fatal("row 1 missing from the point-in-time snapshot")
	}
	if _, ok, _ := r2.Get(key(t, c, 2)); ok {
		t.Fatal("row 2 (applied after the snapshot) leaked into it")
	}
}

// TestConcurrentReadsDuringApply: readers (Get, PrefixScan, Snapshot) run
// while the FSM goroutine applies batches; every read sees a whole batch
// (all rows of one batch carry the same n), never half of one. Run with -race.
func TestConcurrentReadsDuringApply(t *testing.T) {
	st := openTestStore(t)
	c := kvSchemaCodec(t)
	r := st.Replica(1, c)
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(done)
		for idx := uint64(1); idx <= 50; idx++ {
			var batch []Change
			for id := int64(0); id < 20; id++ {
				batch = append(batch, Change{UpdateAfter, Row{Int(id), Str("x"), Int(int64(idx))}})
			}
			if err := r.Apply(batch, idx); err != nil {
				errc <- err
				return
			}
		}
	}()
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		seen := map[int64]bool{}
		if err := r.PrefixScan(nil, func(k, v []byte) error {
			row, err := c.DecodeRow(nil, v)
			if err != nil {
				return err
			}
			seen[row[2].I] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) > 1 {
			t.Fatalf("one scan saw rows of several batches: %v", seen)
		}
		if _, _, err := r.Get(key(t, c, 3)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if idx, _ := r.AppliedIndex(); idx != 50 {
		t.Fatalf("AppliedIndex = %d", idx)
	}
}

// A changelog larger than one badger txn is committed in several; every row
// lands and the applied index is written.
func TestApplyLargerThanOneTxn(t *testing.T) {
	o := DefaultOptions()
	o.MemTableSize = 1 << 20 // txn limit ~150 KiB
	st, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := mkSchema(t, []string{"id"}, "id BIGINT NOT NULL", "v STRING")
	c, err := NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := st.Replica(9, c)
	pad := strings.Repeat("x", 200)
	var changes []Change
	for i := range 5000 {
		changes = append(changes, Change{Insert, Row{Int(int64(i)), Str(pad)}})
	}
	if err := r.Apply(changes, 3); err != nil {
		t.Fatal(err)
	}
	if idx, _ := r.AppliedIndex(); idx != 3 {
		t.Fatalf("applied index %d, want 3", idx)
	}
	n := 0
	if err := r.PrefixScan(nil, func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 5000 {
		t.Fatalf("%d rows stored, want 5000", n)
	}
}

// A Reader sees the state applied when it was opened, and not what is
// applied later (the proposer relies on this: it drops buffered rows the
// FSM applied before it opens its read view).
func TestReaderIsAPointInTimeView(t *testing.T) {
	st := openTestStore(t)
	s := mkSchema(t, []string{"id"}, "id BIGINT NOT NULL", "v STRING")
	c, err := NewCodec(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := st.Replica(3, c)
	if err := r.Apply([]Change{{Insert, Row{Int(1), Str("a")}}}, 1); err != nil {
		t.Fatal(err)
	}
	key, _ := c.AppendKey(nil, Row{Int(1), Null()})
	rd := r.NewReader()
	defer rd.Close()
	if err := r.Apply([]Change{{UpdateAfter, Row{Int(1), Str("b")}}}, 2); err != nil {
		t.Fatal(err)
	}
	row, ok, err := rd.Get(key)
	if err != nil || !ok || string(row[1].B) != "a" {
		t.Fatalf("reader opened before the update: %v %v %v, want a", fmtRow(s, row), ok, err)
	}
	rd2 := r.NewReader()
	defer rd2.Close()
	row, ok, err = rd2.Get(key)
	if err != nil || !ok || string(row[1].B) != "b" {
		t.Fatalf("reader opened after the update: %v %v %v, want b", fmtRow(s, row), ok, err)
	}
	if _, ok, _ := rd.Get(append(key[:0:0], 9, 9)); ok {
		t.Fatal("a missing key was found")
	}
}

// TestSetCodecAddsColumns: a replica given a later schema version (columns
// appended) stores rows of both versions, reads the older ones with NULL in
// the new columns, and never goes back to a narrower codec.
func TestSetCodecAddsColumns(t *testing.T) {
	st := openTestStore(t)
	v1 := mkSchema(t, []string{"id"}, "id BIGINT NOT NULL", "v STRING")
	v2 := mkSchema(t, []string{"id"}, "id BIGINT NOT NULL", "v STRING", "n BIGINT")
	v2.ID = 2
	c1, err := NewCodec(v1, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := NewCodec(v2, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := st.Replica(5, c1)
	if err := r.Apply([]Change{{Insert, Row{Int(1), Str("a")}}}, 1); err != nil {
		t.Fatal(err)
	}
	old := r.NewReader()
	defer old.Close()
	r.SetCodec(c2)
	r.SetCodec(c1) // narrower: ignored
	if r.Codec() != c2 {
		t.Fatal("SetCodec did not keep the wider codec")
	}
	// Both versions' rows apply in one entry.
	if err := r.Apply([]Change{{Insert, Row{Int(2), Str("b"), Int(7)}}, {Insert, Row{Int(3), Str("c")}}}, 2); err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{1: `(1,"a",NULL)`, 2: `(2,"b",7)`, 3: `(3,"c",NULL)`}
	rd := r.NewReader()
	defer rd.Close()
	for id, w := range want {
		row, ok, err := r.Get(key(t, c2, id))
		if err != nil || !ok || fmtRow(v2, row) != w {
			t.Fatalf("Get(%d) = %s %v %v, want %s", id, fmtRow(v2, row), ok, err, w)
		}
		row, ok, err = rd.Get(key(t, c2, id))
		if err != nil || !ok || fmtRow(v2, row) != w {
			t.Fatalf("Reader.Get(%d) = %s %v %v, want %s", id, fmtRow(v2, row), ok, err, w)
		}
	}
	// A reader opened before the change decodes with the old codec, and a
	// row of the new version through it is an error, never a row cut short.
	if old.Codec() != c1 {
		t.Fatal("a reader's codec changed after it opened")
	}
	if _, err := c1.DecodeRow(nil, mustValue(t, r, key(t, c2, 2))); !errors.Is(err, ErrNewerRow) {
		t.Fatalf("a v2 row through the v1 codec: %v", err)
	}
}

func mustValue(t *testing.T, r *Replica, key []byte) []byte {
	t.Helper()
	v, ok, err := r.AppendValue(nil, key)
	if err != nil || !ok {
		t.Fatalf("no value: %v", err)
	}
	return v
}
