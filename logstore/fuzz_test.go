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
