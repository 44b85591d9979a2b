package logstore

import (
	"bytes"
	"errors"
	"log/slog"
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

// FuzzOpenLastSegment opens a log whose only segment holds valid frames
// followed by arbitrary bytes: Open either cuts the file back to a prefix
// of itself that reads back, or refuses with a CorruptionError and leaves
// the file as it was; it never panics.
func FuzzOpenLastSegment(f *testing.F) {
	var valid []byte
	for i := uint64(1); i <= 4; i++ {
		valid = appendFrame(valid, cmd(i, 1, 100, 3, 5, 30), int64(100+3*(i-1)), 3, 5, true)
	}
	f.Add(valid[:0], []byte{})
	f.Add(valid[:len(valid)-7], []byte{})
	f.Add(valid, bytes.Repeat([]byte{0xab}, 100))
	damaged := bytes.Clone(valid)
	damaged[70] ^= 1
	f.Add(damaged, []byte{})
	f.Fuzz(func(t *testing.T, head, tail []byte) {
		data := append(bytes.Clone(head), tail...)
		fs := NewMemFS()
		seg := join("/d", segmentStem(1)+".log")
		fs.WriteFile(seg, data)
		l, err := Open(Options{Dir: "/d", FS: fs, OffsetFunc: testOffsets, Logger: slog.New(slog.DiscardHandler)})
		after, _ := fs.ReadFile(seg)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("Open failed with %v, want a CorruptionError", err)
			}
			if !bytes.Equal(after, data) {
				t.Fatalf("Open refused the segment but changed it (%d bytes, was %d)", len(after), len(data))
			}
			return
		}
		defer l.Close()
		if len(after) > len(data) || !bytes.Equal(after, data[:len(after)]) {
			t.Fatalf("Open left %d bytes that are not a prefix of the %d it found", len(after), len(data))
		}
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		for i := first; i <= last && last > 0; i++ {
			var e raft.Log
			if err := l.GetLog(i, &e); err != nil {
				t.Fatalf("GetLog(%d) of [%d, %d]: %v", i, first, last, err)
			}
		}
	})
}
