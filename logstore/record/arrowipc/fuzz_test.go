package arrowipc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// seedStreams are real arrow-go streams of flat and nested schemas, and of
// one with dictionary-encoded fields (two batches with different
// dictionaries), under every compression.
func seedStreams(f *testing.F) [][]byte {
	rng := rand.New(rand.NewPCG(11, 12))
	var out [][]byte
	for _, fields := range [][]arrow.Field{flatFields, nestedFields} {
		schema := arrow.NewSchema(fields, nil)
		for _, c := range compressions {
			rec := randomRecord(f, rng, schema, 5, 30)
			out = append(out, writeStream(f, schema, c.opts, rec))
			rec.Release()
		}
	}
	for _, c := range compressions {
		r1 := dictRecord(f, rng, 5, []string{"a", "bb"})
		r2 := dictRecord(f, rng, 3, []string{"ccc"})
		out = append(out, writeStream(f, dictSchema, c.opts, r1, r2))
		r1.Release()
		r2.Release()
	}
	return out
}

func checkErr(t *testing.T, err error) {
	if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error wraps no sentinel: %v", err)
	}
}

func FuzzSplitStream(f *testing.F) {
	for _, s := range seedStreams(f) {
		f.Add(s)
		schemaMsg, batches, err := SplitStream(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(legacyStream(f, schemaMsg, batches))
	}
	f.Add([]byte{})
	f.Add(eosModern)
	f.Fuzz(func(t *testing.T, stream []byte) {
		schemaMsg, batches, err := SplitStream(stream)
		checkErr(t, err)
		if err != nil {
			return
		}
		// Re-assembled, the stream splits into the same messages.
		again := AppendStream(nil, schemaMsg, batches...)
		s2, b2, err := SplitStream(again)
		if err != nil {
			t.Fatalf("re-split of AppendStream output: %v", err)
		}
		if len(b2) != len(batches) || !bytes.Equal(msgBody(t, s2), msgBody(t, schemaMsg)) {
			t.Fatalf("re-split: %d batches, want %d", len(b2), len(batches))
		}
		for i := range batches {
			if !bytes.Equal(msgBody(t, b2[i]), msgBody(t, batches[i])) {
				t.Fatalf("batch %d body changed by re-framing", i)
			}
			n1, err1 := BatchLength(batches[i])
			n2, err2 := BatchLength(b2[i])
			if n1 != n2 || (err1 == nil) != (err2 == nil) {
				t.Fatalf("BatchLength changed by re-framing: %d,%v vs %d,%v", n1, err1, n2, err2)
			}
		}
		_, err = LayoutOf(schemaMsg)
		checkErr(t, err)
	})
}

// subLayout is the layout of the projected schema, its dictionaries
// numbered as Project numbers them.
func subLayout(l *Layout, keep []int) *Layout {
	s := &Layout{nodeStart: []int{0}, bufStart: []int{0}}
	for i, k := range keep {
		n0, n1, b0, b1 := l.Span(k)
		s.nodeStart = append(s.nodeStart, s.nodeStart[i]+n1-n0)
		s.bufStart = append(s.bufStart, s.bufStart[i]+b1-b0)
		if id, ok := l.DictionaryID(k); ok {
			d, _ := l.dictByID(id)
			d.field, d.id = i, int64(len(s.dicts))
			s.dicts = append(s.dicts, d)
		}
	}
	return s
}

func FuzzProject(f *testing.F) {
	for _, s := range seedStreams(f) {
		schemaMsg, batches, err := SplitStream(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(schemaMsg, batches[0], uint64(0b1011))
		f.Add(schemaMsg, toLegacy(f, batches[0]), uint64(1<<63|1))
	}
	f.Fuzz(func(t *testing.T, schemaMsg, batchMsg []byte, mask uint64) {
		layout, err := LayoutOf(schemaMsg)
		checkErr(t, err)
		if err != nil {
			return
		}
		var keep []int
		for i := range min(layout.NumFields(), 64) {
			if mask&(1<<i) != 0 {
				keep = append(keep, i)
			}
		}
		out, err := Project(nil, batchMsg, keep, layout)
		checkErr(t, err)
		if err != nil {
			return
		}
		if len(out)%8 != 0 {
			t.Fatalf("projected message is %d bytes, not 8-aligned", len(out))
		}
		n1, err1 := BatchLength(batchMsg)
		n2, err2 := BatchLength(out)
		if n1 != n2 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("BatchLength %d,%v; projected %d,%v", n1, err1, n2, err2)
		}
		// Projecting the projection onto all its fields is the identity.
		sub := subLayout(layout, keep)
		again, err := Project(nil, out, seq(len(keep)), sub)
		if err != nil {
			t.Fatalf("re-projecting the output: %v", err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("re-projection is not the identity")
		}
		dicts, _, err := viewBody(out)
		if err != nil {
			t.Fatalf("projected body: %v", err)
		}
		bufs := sub.NumBuffers()
		for _, d := range dicts {
			bufs += d.bufs.n
		}
		if len(out) > len(batchMsg)+(len(dicts)+1)*(8+1024)+7*bufs {
			t.Fatalf("output %d bytes from a %d-byte input", len(out), len(batchMsg))
		}
	})
}
