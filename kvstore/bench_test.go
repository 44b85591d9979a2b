package kvstore

import (
	"bytes"
	"fmt"
	"testing"
)

func benchReplica(b *testing.B, rows int) (*Replica, *Codec) {
	st := openTestStore(b)
	c := kvSchemaCodec(b)
	r := st.Replica(1, c)
	var batch []Change
	idx := uint64(0)
	for i := 0; i < rows; i++ {
		batch = append(batch, Change{Insert, Row{Int(int64(i)), Str(fmt.Sprintf("name-%08d", i)), Int(int64(i))}})
		if len(batch) == 1000 {
			idx++
			if err := r.Apply(batch, idx); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return r, c
}

func BenchmarkGet(b *testing.B) {
	r, c := benchReplica(b, 10000)
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = key(b, c, int64(i*9))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, ok, err := r.Get(keys[i%len(keys)]); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkAppendValue(b *testing.B) {
	r, c := benchReplica(b, 10000)
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = key(b, c, int64(i*9))
	}
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ok bool
		var err error
		if buf, ok, err = r.AppendValue(buf[:0], keys[i%len(keys)]); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkApply1000(b *testing.B) {
	st := openTestStore(b)
	c := kvSchemaCodec(b)
	r := st.Replica(1, c)
	batch := make([]Change, 1000)
	for i := range batch {
		batch[i] = Change{UpdateAfter, Row{Int(int64(i)), Str(fmt.Sprintf("name-%08d", i)), Int(int64(i))}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Apply(batch, uint64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPrefixScan(b *testing.B) {
	// 100 bucket keys × 100 rows each; scan one bucket key's rows.
	st := openTestStore(b)
	s := mkSchema(b, []string{"tenant", "id"}, "tenant BIGINT NOT NULL", "id BIGINT NOT NULL", "v STRING")
	c, err := NewCodec(s, []string{"tenant"})
	if err != nil {
		b.Fatal(err)
	}
	r := st.Replica(1, c)
	for tn := int64(0); tn < 100; tn++ {
		var batch []Change
		for id := int64(0); id < 100; id++ {
			batch = append(batch, Change{Insert, Row{Int(tn), Int(id), Str("value")}})
		}
		if err := r.Apply(batch, uint64(tn+1)); err != nil {
			b.Fatal(err)
		}
	}
	prefixes := make([][]byte, 100)
	for i := range prefixes {
		prefixes[i], _ = c.AppendBucketKey(nil, []Value{Int(int64(i))})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		if err := r.PrefixScan(prefixes[i%100], func(k, v []byte) error { n++; return nil }); err != nil || n != 100 {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkMergeAggregation(b *testing.B) {
	s := mkSchema(b, []string{"id"}, "id BIGINT NOT NULL", "tag STRING", "total BIGINT", "hi INT")
	m, err := NewMerger(s, map[string]string{PropMergeEngine: "aggregation", "fields.total.agg": "sum", "fields.hi.agg": "max"})
	if err != nil {
		b.Fatal(err)
	}
	old := Row{Int(1), Str("a"), Int(5), Int(9)}
	in := Row{Int(1), Str("b"), Int(7), Int(3)}
	var dst []Change
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_, dst, err = m.Upsert(dst[:0], old, in, nil)
		if err != nil || len(dst) != 2 {
			b.Fatal(err)
		}
	}
}

func FuzzReadSnapshot(f *testing.F) {
	st, err := Open("", Options{InMemory: true, MemTableSize: 1 << 20, NumMemtables: 1, BlockCacheSize: 0, ValueThreshold: 1 << 10, ValueLogFileSize: 1 << 20, NumCompactors: 2})
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	c := kvSchemaCodec(f)
	r := st.Replica(1, c)
	if err := r.Apply([]Change{{Insert, Row{Int(1), Str("a"), Int(2)}}, {Insert, Row{Int(2), Null(), Null()}}}, 3); err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.Snapshot(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(snapMagic)
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := readSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, e := range entries {
			if len(e.k) > maxSnapshotEntry || len(e.v) > maxSnapshotEntry {
				t.Fatal("entry over the limit accepted")
			}
		}
	})
}
