package logstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func FuzzFrameDecode(f *testing.F) {
	f.Add(appendFrame(nil, cmd(7, 2, 100, 3, 5, 30), 100, 3, 5, true))
	f.Add(appendFrame(nil, &raft.Log{Index: 1, Term: 1, Type: raft.LogNoop, Extensions: []byte("e")}, 4, 0, 0, false))
	f.Add([]byte{})
	f.Add(make([]byte, frameHeaderLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m frameMeta
		ext, data, err := decodeFrame(b, &m)
		if err != nil {
			return
		}
		// A frame that decodes re-encodes to the same bytes.
		var l raft.Log
		m.fill(&l, ext, data)
		if m.appendedAt == 0 {
			l.AppendedAt = time.Time{}
		}
		again := appendFrame(nil, &l, m.offset, m.count, m.maxTs, m.hasRecords())
		if !bytes.Equal(again, b[:m.size()]) {
			t.Fatalf("re-encoded frame differs:\n%x\n%x", again, b[:m.size()])
		}
	})
}

// FuzzOpenSegmentFile: any bytes (a tiered copy read back from remote
// storage) either open as a segment file whose reads stay within it, or
// are refused; nothing panics.
func FuzzOpenSegmentFile(f *testing.F) {
	one := appendFrame(nil, cmd(7, 2, 100, 3, 5, 30), 100, 3, 5, true)
	two := append(bytes.Clone(one), appendFrame(nil, &raft.Log{Index: 8, Term: 2, Type: raft.LogNoop}, 103, 0, 0, false)...)
	f.Add(one)
	f.Add(two)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := OpenSegmentFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		if sf.NextOffset() < sf.FirstOffset() {
			t.Fatalf("segment file holds [%d, %d)", sf.FirstOffset(), sf.NextOffset())
		}
		next := sf.FirstOffset()
		err = sf.Read(sf.FirstOffset(), sf.NextOffset(), 1<<20, func(_ uint64, base int64, count int32, _ []byte) bool {
			if base != next || count < 0 {
				t.Fatalf("visited [%d, +%d) after reading up to %d", base, count, next)
			}
			next = base + int64(count)
			return true
		})
		if err != nil || next != sf.NextOffset() {
			t.Fatalf("read up to %d of [%d, %d): %v", next, sf.FirstOffset(), sf.NextOffset(), err)
		}
		sf.OffsetForTimestamp(0)
	})
}
