package logstore

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

func benchLog(b *testing.B, s *Syncer) *Log {
	l, err := Open(Options{Dir: b.TempDir(), OffsetFunc: testOffsets, Syncer: s,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

func BenchmarkStoreLogs(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s := NewSyncer(nil)
			defer s.Close()
			l := benchLog(b, s)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			logs := []*raft.Log{nil}
			for i := range b.N {
				logs[0] = cmd(uint64(i+1), 1, int64(i), 1, int64(i), size-20)
				if err := l.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func fillLog(b *testing.B, n, size int) *Log {
	l := benchLog(b, nil)
	l.opts.SyncMode = SyncInterval // fill fast
	for i := range n {
		if err := l.StoreLog(cmd(uint64(i+1), 1, int64(i), 1, int64(i), size)); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

func BenchmarkGetLogRecent(b *testing.B) {
	l := fillLog(b, 5000, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	var out raft.Log
	for i := range b.N {
		if err := l.GetLog(uint64(5000-i%500), &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetLogOld(b *testing.B) {
	l := fillLog(b, 5000, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	var out raft.Log
	for i := range b.N {
		if err := l.GetLog(uint64(1+i%3000), &out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadByOffset(b *testing.B) {
	l := fillLog(b, 5000, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	b.SetBytes(1 << 20)
	for i := range b.N {
		off := int64(i*37) % 4000
		if err := l.Read(off, 5000, 1<<20, func(uint64, int64, int32, []byte) bool { return true }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncer: G goroutines over F files, each writing 1 KiB then
// Sync. Reports syncs/s (Sync calls completed) and waits per flush round.
func BenchmarkSyncer(b *testing.B) {
	for _, tc := range []struct {
		g, f   int
		syncfs bool
	}{{1, 1, false}, {1, 1, true}, {4, 4, false}, {4, 4, true}, {16, 16, false}, {16, 16, true}, {64, 64, false}, {64, 64, true}, {256, 256, false}, {256, 256, true}} {
		name := fmt.Sprintf("G%d_F%d_%s", tc.g, tc.f, map[bool]string{false: "fdatasync", true: "syncfs"}[tc.syncfs])
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			files := make([]File, tc.f)
			for i := range files {
				f, err := OSFS{}.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				files[i] = f
			}
			s := NewSyncer(nil)
			if tc.syncfs {
				s.SyncfsThreshold = 1
			}
			defer s.Close()
			b.ReportAllocs()
			buf := make([]byte, 1024)
			var wg sync.WaitGroup
			per := b.N/tc.g + 1
			b.ResetTimer()
			for g := range tc.g {
				wg.Add(1)
				go func() {
					defer wg.Done()
					f := files[g%tc.f]
					off := int64(0)
					for range per {
						f.WriteAt(buf, off)
						off += 1024
						if err := s.Sync(f); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			st := s.Stats()
			b.ReportMetric(float64(st.Waits)/b.Elapsed().Seconds(), "syncs/s")
			b.ReportMetric(float64(st.Waits)/float64(max(st.Rounds, 1)), "waits/flush")
		})
	}
}

// BenchmarkOpenSegmentFile: the check and index rebuild of a tiered
// segment copy (16 KiB entries), which a remote read pays once per segment
// it opens.
func BenchmarkOpenSegmentFile(b *testing.B) {
	l, err := Open(Options{Dir: b.TempDir(), OffsetFunc: testOffsets, SegmentBytes: 16 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for i := range 1100 { // a little over one 16 MiB segment
		if err := l.StoreLogs([]*raft.Log{cmd(uint64(i+1), 1, int64(i)*3, 3, int64(i), 16<<10)}); err != nil {
			b.Fatal(err)
		}
	}
	c := l.ClosedSegments()[0]
	data, err := io.ReadAll(io.NewSectionReader(c.Data, 0, c.Size))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(c.Size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenSegmentFile(bytes.NewReader(data), c.Size); err != nil {
			b.Fatal(err)
		}
	}
}
