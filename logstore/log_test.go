package logstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Test entries: LogCommand data = base(8) count(4) ts(8) payload.
func testOffsets(l *raft.Log) (int64, int32, int64, bool) {
	if l.Type != raft.LogCommand || len(l.Data) < 20 {
		return 0, 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(l.Data)), int32(binary.LittleEndian.Uint32(l.Data[8:])),
		int64(binary.LittleEndian.Uint64(l.Data[12:])), true
}

func cmd(index, term uint64, base int64, count int32, ts int64, payload int) *raft.Log {
	d := binary.LittleEndian.AppendUint64(nil, uint64(base))
	d = binary.LittleEndian.AppendUint32(d, uint32(count))
	d = binary.LittleEndian.AppendUint64(d, uint64(ts))
	for i := range payload {
		d = append(d, byte(int(index)+i))
	}
	return &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: d,
		AppendedAt: time.Unix(1700000000, int64(index)).UTC()}
}

func noop(index, term uint64) *raft.Log {
	return &raft.Log{Index: index, Term: term, Type: raft.LogNoop}
}

type env struct {
	t    *testing.T
	fs   *MemFS
	opts Options
}

func newEnv(t *testing.T) *env {
	return &env{t: t, fs: NewMemFS(), opts: Options{Dir: "/d", OffsetFunc: testOffsets,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SegmentBytes: 4096, IndexIntervalBytes: 256}}
}

func (e *env) open() *Log {
	e.t.Helper()
	o := e.opts
	o.FS = e.fs
	l, err := Open(o)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	return l
}

// gen produces entries continuing a log: every 5th entry is a noop.
type gen struct {
	index uint64
	next  int64
	ts    int64
}

func (g *gen) batch(n, payload int) []*raft.Log {
	var out []*raft.Log
	for range n {
		g.index++
		if g.index%5 == 0 {
			out = append(out, noop(g.index, 1))
			continue
		}
		g.ts += 10
		out = append(out, cmd(g.index, 1, g.next, 3, g.ts, payload))
		g.next += 3
	}
	return out
}

func mustStore(t *testing.T, l *Log, logs []*raft.Log) {
	t.Helper()
	if err := l.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
}

func checkRange(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	f, _ := l.FirstIndex()
	la, _ := l.LastIndex()
	if f != first || la != last {
		t.Fatalf("range = [%d, %d], want [%d, %d]", f, la, first, last)
	}
}

func checkEntries(t *testing.T, l *Log, want []*raft.Log) {
	t.Helper()
	for _, w := range want {
		var got raft.Log
		if err := l.GetLog(w.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", w.Index, err)
		}
		if got.Index != w.Index || got.Term != w.Term || got.Type != w.Type || !bytes.Equal(got.Data, w.Data) ||
			!bytes.Equal(got.Extensions, w.Extensions) || !got.AppendedAt.Equal(w.AppendedAt) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", w.Index, got, *w)
		}
	}
}

func TestLogStoreConformance(t *testing.T) {
	e := newEnv(t)
	l := e.open()
	checkRange(t, l, 0, 0)
	var got raft.Log
	if err := l.GetLog(1, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty = %v, want ErrLogNotFound", err)
	}
	g := &gen{}
	var all []*raft.Log
	one := g.batch(1, 10)
	one[0].Extensions = []byte("ext")
	if err := l.StoreLog(one[0]); err != nil {
		t.Fatal(err)
	}
	all = append(all, one...)
	for range 20 {
		b := g.batch(7, 100)
		mustStore(t, l, b)
		all = append(all, b...)
	}
	checkRange(t, l, 1, 141)
	checkEntries(t, l, all)
	if len(l.segs) < 3 {
		t.Fatalf("only %d segments: roll by size did not happen", len(l.segs))
	}
	if l.NextOffset() != g.next || l.StartOffset() != 0 {
		t.Fatalf("offsets [%d, %d), want [0, %d)", l.StartOffset(), l.NextOffset(), g.next)
	}
	for _, tc := range []struct {
		name string
		logs []*raft.Log
	}{
		{"gap", []*raft.Log{cmd(143, 1, g.next, 1, 1, 1)}},
		{"rewrite", []*raft.Log{cmd(141, 1, g.next, 1, 1, 1)}},
		{"gap inside batch", []*raft.Log{cmd(142, 1, g.next, 1, 1, 1), cmd(144, 1, g.next+1, 1, 1, 1)}},
		{"offset gap", []*raft.Log{cmd(142, 1, g.next+1, 1, 1, 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := l.StoreLogs(tc.logs); !errors.Is(err, ErrNonContiguous) {
				t.Fatalf("StoreLogs = %v, want ErrNonContiguous", err)
			}
			checkRange(t, l, 1, 141)
		})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = e.open()
	defer l.Close()
	checkRange(t, l, 1, 141)
	checkEntries(t, l, all)
	b := g.batch(3, 10)
	mustStore(t, l, b)
	checkEntries(t, l, b)
}

func TestDeleteRange(t *testing.T) {
	t.Run("head", func(t *testing.T) {
		e := newEnv(t)
		l := e.open()
		g := &gen{}
		var all []*raft.Log
		for range 10 {
			b := g.batch(10, 100)
			mustStore(t, l, b)
			all = append(all, b...)
		}
		nseg := len(l.segs)
		if err := l.DeleteRange(1, 50); err != nil {
			t.Fatal(err)
		}
		checkRange(t, l, 51, 100)
		if len(l.segs) >= nseg {
			t.Fatalf("no segment deleted: %d -> %d", nseg, len(l.segs))
		}
		var got raft.Log
		for _, i := range []uint64{1, 49, 50} {
			if err := l.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
			}
		}
		// Entry 50 is a noop; 51 holds offsets from 120.
		if l.StartOffset() != 120 {
			t.Fatalf("StartOffset = %d, want 120", l.StartOffset())
		}
		if err := l.Read(119, 200, 1<<20, func(uint64, int64, int32, []byte) bool { return true }); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read below start = %v", err)
		}
		checkEntries(t, l, all[50:])
		l.Close()
		l = e.open()
		defer l.Close()
		checkRange(t, l, 51, 100)
		checkEntries(t, l, all[50:])
		if l.StartOffset() != 120 {
			t.Fatalf("StartOffset after reopen = %d, want 120", l.StartOffset())
		}
	})
	t.Run("tail", func(t *testing.T) {
		e := newEnv(t)
		l := e.open()
		g := &gen{}
		var all []*raft.Log
		for range 10 {
			b := g.batch(10, 100)
			mustStore(t, l, b)
			all = append(all, b...)
		}
		if err := l.DeleteRange(37, 100); err != nil {
			t.Fatal(err)
		}
		checkRange(t, l, 1, 36)
		// 36 entries, 7 noops (5..35): 29 commands * 3.
		if l.NextOffset() != 87 {
			t.Fatalf("NextOffset = %d, want 87", l.NextOffset())
		}
		checkEntries(t, l, all[:36])
		// The new leader's entries at term 2 continue.
		nb := []*raft.Log{cmd(37, 2, 87, 2, 5000, 50), noop(38, 2), cmd(39, 2, 89, 1, 5001, 50)}
		mustStore(t, l, nb)
		l.Close()
		l = e.open()
		defer l.Close()
		checkRange(t, l, 1, 39)
		checkEntries(t, l, append(append([]*raft.Log{}, all[:36]...), nb...))
		if l.NextOffset() != 90 {
			t.Fatalf("NextOffset after reopen = %d, want 90", l.NextOffset())
		}
	})
	t.Run("all then restart elsewhere", func(t *testing.T) {
		e := newEnv(t)
		l := e.open()
		g := &gen{}
		mustStore(t, l, g.batch(30, 100))
		next := l.NextOffset()
		if err := l.DeleteRange(1, 30); err != nil {
			t.Fatal(err)
		}
		checkRange(t, l, 0, 0)
		if l.NextOffset() != next || l.StartOffset() != next {
			t.Fatalf("offsets after full delete [%d, %d), want %d", l.StartOffset(), l.NextOffset(), next)
		}
		l.Close()
		l = e.open()
		defer l.Close()
		checkRange(t, l, 0, 0)
		if l.NextOffset() != next {
			t.Fatalf("NextOffset after reopen = %d, want %d", l.NextOffset(), next)
		}
		b := []*raft.Log{cmd(500, 3, 1000, 5, 1, 10)}
		mustStore(t, l, b)
		checkRange(t, l, 500, 500)
		checkEntries(t, l, b)
		if l.StartOffset() != 1000 || l.NextOffset() != 1005 {
			t.Fatalf("offsets [%d, %d), want [1000, 1005)", l.StartOffset(), l.NextOffset())
		}
	})
	t.Run("middle is rejected", func(t *testing.T) {
		e := newEnv(t)
		l := e.open()
		defer l.Close()
		mustStore(t, l, (&gen{}).batch(30, 10))
		if err := l.DeleteRange(10, 20); err == nil {
			t.Fatal("DeleteRange in the middle succeeded")
		}
		checkRange(t, l, 1, 30)
	})
}

type visit struct {
	index uint64
	base  int64
	count int32
}

func readAll_(t *testing.T, l *Log, from, end int64, maxBytes int) []visit {
	t.Helper()
	return visitAll(t, l.Read, from, end, maxBytes)
}

// visitAll collects what read (Log.Read, SegmentFile.Read) visits, checking
// each entry's data against the base offset read reports.
func visitAll(t *testing.T, read func(offset, endOffset int64, maxBytes int, fn func(index uint64, base int64, count int32, data []byte) bool) error,
	from, end int64, maxBytes int) []visit {
	t.Helper()
	var out []visit
	err := read(from, end, maxBytes, func(i uint64, b int64, c int32, data []byte) bool {
		if int64(binary.LittleEndian.Uint64(data)) != b {
			t.Fatalf("entry %d data says base %d, Read says %d", i, binary.LittleEndian.Uint64(data), b)
		}
		out = append(out, visit{i, b, c})
		return true
	})
	if err != nil {
		t.Fatalf("Read(%d, %d): %v", from, end, err)
	}
	return out
}

func TestReadByOffset(t *testing.T) {
	e := newEnv(t)
	l := e.open()
	defer l.Close()
	g := &gen{}
	for range 20 {
		mustStore(t, l, g.batch(10, 120))
	}
	next := l.NextOffset()
	for _, tc := range []struct {
		name          string
		from, end     int64
		maxBytes      int
		wantFirstBase int64
		wantEnd       int64 // base+count of the last visit
	}{
		{"all", 0, next, 1 << 30, 0, next},
		{"mid entry start", 10, next, 1 << 30, 9, next},
		{"high watermark cuts", 0, 100, 1 << 30, 0, 102},
		{"hw on entry boundary", 30, 60, 1 << 30, 30, 60},
		{"one entry at least", 50, next, 1, 48, 51},
		{"bytes limit", 0, next, 10 * 140, 0, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := readAll_(t, l, tc.from, tc.end, tc.maxBytes)
			if len(v) == 0 {
				t.Fatal("nothing visited")
			}
			if v[0].base != tc.wantFirstBase || v[len(v)-1].base+int64(v[len(v)-1].count) != tc.wantEnd {
				t.Fatalf("visited [%d .. %d), want [%d .. %d)", v[0].base, v[len(v)-1].base+int64(v[len(v)-1].count), tc.wantFirstBase, tc.wantEnd)
			}
			for i, x := range v {
				if x.base >= tc.end {
					t.Fatalf("visited base %d >= endOffset %d", x.base, tc.end)
				}
				if i > 0 && x.base != v[i-1].base+int64(v[i-1].count) {
					t.Fatalf("gap between visits %v and %v", v[i-1], x)
				}
			}
		})
	}
	if v := readAll_(t, l, next, next+100, 1<<20); len(v) != 0 {
		t.Fatalf("Read at NextOffset visited %v", v)
	}
	if err := l.Read(next+1, next+5, 100, func(uint64, int64, int32, []byte) bool { return true }); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read past end = %v", err)
	}
}

func TestRollByAgeRetentionAndTimestamps(t *testing.T) {
	e := newEnv(t)
	now := time.Unix(1000, 0)
	e.opts.Now = func() time.Time { return now }
	e.opts.SegmentBytes = 1 << 20
	e.opts.SegmentMaxAge = time.Minute
	l := e.open()
	defer l.Close()
	index, off := uint64(0), int64(0)
	// Four segments by age; segment k holds timestamps 1000k+1..1000k+10.
	for seg := range 4 {
		for i := range 10 {
			index++
			mustStore(t, l, []*raft.Log{cmd(index, 1, off, 2, int64(seg*1000+i+1), 50)})
			off += 2
		}
		now = now.Add(time.Minute)
	}
	if len(l.segs) != 4 {
		t.Fatalf("%d segments, want 4 (roll by age)", len(l.segs))
	}
	for _, tc := range []struct {
		ts   int64
		want int64
		ok   bool
	}{{0, 0, true}, {5, 8, true}, {1000, 20, true}, {1001, 20, true}, {2010, 58, true}, {3010, 78, true}, {3011, 80, false}} {
		got, ok := l.OffsetForTimestamp(tc.ts)
		if got != tc.want || ok != tc.ok {
			t.Fatalf("OffsetForTimestamp(%d) = %d, %v; want %d, %v", tc.ts, got, ok, tc.want, tc.ok)
		}
	}
	// Retention: cutoff after segment 1's newest, but raft snapshot only covers index 15.
	if got := l.Expired(2000); got != 20 {
		t.Fatalf("Expired(2000) = %d, want 20 (the last index of segment 1)", got)
	}
	if got := l.Expired(5); got != 0 {
		t.Fatalf("Expired(5) = %d, want 0 (segment 0 holds newer records)", got)
	}
	if n, err := l.DeleteBefore(2000, 15); err != nil || n != 1 {
		t.Fatalf("DeleteBefore = %d, %v; want 1", n, err)
	}
	if n, err := l.DeleteBefore(2000, 100); err != nil || n != 1 {
		t.Fatalf("DeleteBefore = %d, %v; want 1", n, err)
	}
	if got := l.Expired(2000); got != 0 {
		t.Fatalf("Expired(2000) after deleting = %d, want 0", got)
	}
	// Never the active segment.
	if n, err := l.DeleteBefore(1<<40, 1<<40); err != nil || n != 1 {
		t.Fatalf("DeleteBefore = %d, %v; want 1", n, err)
	}
	checkRange(t, l, 31, 40)
	if l.StartOffset() != 60 {
		t.Fatalf("StartOffset = %d, want 60", l.StartOffset())
	}
	if got, ok := l.OffsetForTimestamp(0); got != 60 || !ok {
		t.Fatalf("OffsetForTimestamp(0) after retention = %d, %v", got, ok)
	}
	if v := readAll_(t, l, 60, 80, 1<<20); len(v) != 10 {
		t.Fatalf("read %d entries after retention, want 10", len(v))
	}
}

// TestCrashTornLastFrame cuts the last frame at every length and flips
// every byte of it: reopen yields exactly the complete frames and appends
// continue.
func TestCrashTornLastFrame(t *testing.T) {
	e := newEnv(t)
	e.opts.SegmentBytes = 1 << 20
	l := e.open()
	g := &gen{}
	base := g.batch(6, 40)
	mustStore(t, l, base)
	sizeBefore := l.Size()
	lastFrame := g.batch(1, 40)
	mustStore(t, l, lastFrame)
	l.Close()
	seg := filepath.Join("/d", segmentStem(1)+".log")
	full, _ := e.fs.ReadFile(seg)
	check := func(t *testing.T, data []byte, wantLast uint64) {
		fs := NewMemFS()
		fs.WriteFile(seg, data)
		ee := *e
		ee.fs = fs
		ee.t = t
		l := ee.open()
		defer l.Close()
		checkRange(t, l, 1, wantLast)
		all := append(append([]*raft.Log{}, base...), lastFrame...)
		checkEntries(t, l, all[:wantLast])
		// Appends continue after the truncated tail.
		gg := &gen{index: wantLast, next: l.NextOffset(), ts: 1e6}
		nb := gg.batch(2, 30)
		mustStore(t, l, nb)
		checkEntries(t, l, nb)
	}
	for n := sizeBefore; n < int64(len(full)); n++ {
		t.Run(fmt.Sprintf("cut%d", n), func(t *testing.T) { check(t, full[:n], 6) })
	}
	for p := sizeBefore; p < int64(len(full)); p++ {
		t.Run(fmt.Sprintf("flip%d", p), func(t *testing.T) {
			d := append([]byte(nil), full...)
			d[p] ^= 0x5a
			check(t, d, 6)
		})
	}
	t.Run("intact", func(t *testing.T) { check(t, full, 7) })
	t.Run("zeros after", func(t *testing.T) { check(t, append(append([]byte(nil), full...), make([]byte, 100)...), 7) })
}

func TestCrashDropsUnsynced(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode SyncMode
		want uint64
	}{{"always", SyncAlways, 40}, {"interval", SyncInterval, 20}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.opts.SyncMode = tc.mode
			e.opts.SegmentBytes = 1 << 20   // a roll would sync
			e.opts.SyncInterval = time.Hour // never fires in the test
			l := e.open()
			g := &gen{}
			mustStore(t, l, g.batch(20, 100))
			if tc.mode == SyncInterval {
				// What the background loop does; make the first 20 durable.
				if err := l.segs[len(l.segs)-1].f.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			mustStore(t, l, g.batch(20, 100))
			crashed := e.fs.Crash()
			l.Close()
			e.fs = crashed
			l = e.open()
			defer l.Close()
			checkRange(t, l, 1, tc.want)
		})
	}
}

func TestCorruptionInClosedSegment(t *testing.T) {
	e := newEnv(t)
	l := e.open()
	mustStore(t, l, (&gen{}).batch(60, 100))
	if len(l.segs) < 2 {
		t.Fatal("need 2 segments")
	}
	first := l.segs[0]
	l.Close()
	d, _ := e.fs.ReadFile(first.logPath())
	d[len(d)-10] ^= 1
	e.fs.WriteFile(first.logPath(), d)
	o := e.opts
	o.FS = e.fs
	_, err := Open(o)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != first.name() || ce.Offset <= 0 {
		t.Fatalf("Open = %v, want CorruptionError in %s", err, first.name())
	}
}

func TestIndexRebuild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(fs *MemFS, path string)
	}{
		{"missing", func(fs *MemFS, p string) { _ = fs.Remove(p) }},
		{"garbage", func(fs *MemFS, p string) { fs.WriteFile(p, bytes.Repeat([]byte{0xab}, 100)) }},
		{"short", func(fs *MemFS, p string) { d, _ := fs.ReadFile(p); fs.WriteFile(p, d[:len(d)/2+3]) }},
		{"wrong positions", func(fs *MemFS, p string) {
			d, _ := fs.ReadFile(p)
			for i := 16 + 12; i < len(d); i += 16 {
				d[i]++
			}
			fs.WriteFile(p, d)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			l := e.open()
			g := &gen{}
			var all []*raft.Log
			for range 8 {
				b := g.batch(10, 150)
				mustStore(t, l, b)
				all = append(all, b...)
			}
			want := readAll_(t, l, 0, l.NextOffset(), 1<<30)
			wantTs, _ := l.OffsetForTimestamp(400)
			segs := append([]*segment(nil), l.segs...)
			l.Close()
			for _, s := range segs {
				tc.spoil(e.fs, s.idxPath())
				tc.spoil(e.fs, s.tidxPath())
			}
			l = e.open()
			defer l.Close()
			checkEntries(t, l, all)
			got := readAll_(t, l, 0, l.NextOffset(), 1<<30)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Read after rebuild differs")
			}
			if ts, _ := l.OffsetForTimestamp(400); ts != wantTs {
				t.Fatalf("OffsetForTimestamp = %d, want %d", ts, wantTs)
			}
		})
	}
}

func TestStableStore(t *testing.T) {
	e := newEnv(t)
	l := e.open()
	if v, err := l.Get([]byte("k")); err == nil || err.Error() != "not found" || len(v) != 0 {
		t.Fatalf("Get missing = %q, %v", v, err)
	}
	if v, err := l.GetUint64([]byte("term")); err == nil || err.Error() != "not found" || v != 0 {
		t.Fatalf("GetUint64 missing = %d, %v", v, err)
	}
	if err := l.Set([]byte("k"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	if err := l.SetUint64([]byte("term"), 42); err != nil {
		t.Fatal(err)
	}
	crashed := e.fs.Crash() // Set is durable on return
	l.Close()
	e.fs = crashed
	l = e.open()
	defer l.Close()
	if v, err := l.Get([]byte("k")); err != nil || string(v) != "value" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if v, err := l.GetUint64([]byte("term")); err != nil || v != 42 {
		t.Fatalf("GetUint64 = %d, %v", v, err)
	}
}

func TestDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	l.Close()
	l, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	l.Close()
}

func TestOSFileLog(t *testing.T) {
	dir := t.TempDir()
	s := NewSyncer(nil)
	defer s.Close()
	opts := Options{Dir: dir, OffsetFunc: testOffsets, Syncer: s, SegmentBytes: 8192}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{}
	var all []*raft.Log
	for range 10 {
		b := g.batch(10, 300)
		mustStore(t, l, b)
		all = append(all, b...)
	}
	l.Close()
	if l, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checkEntries(t, l, all)
	if st := s.Stats(); st.Waits < 10 || st.Rounds == 0 {
		t.Fatalf("syncer stats %+v", st)
	}
}

// encodedIndexes is what the index files of s must hold, from its
// in-memory entries.
func encodedIndexes(s *segment) (idx, tidx []byte) {
	for _, e := range s.index {
		idx = binary.LittleEndian.AppendUint64(idx, uint64(e.offset))
		idx = binary.LittleEndian.AppendUint32(idx, e.rel)
		idx = binary.LittleEndian.AppendUint32(idx, e.pos)
	}
	for _, e := range s.tindex {
		tidx = binary.LittleEndian.AppendUint64(tidx, uint64(e.ts))
		tidx = binary.LittleEndian.AppendUint64(tidx, uint64(e.offset))
	}
	return idx, tidx
}

// TestIndexFiles checks when index files are written: a sealed segment's
// files hold exactly its in-memory entries; the active segment's files are
// written only at tail truncation and Close (appends write nothing but
// frames), so they hold a prefix of its entries, and after a clean reopen,
// a crash or a truncation exactly its entries. A reopened log serves the
// same entries and timestamps.
func TestIndexFiles(t *testing.T) {
	// exact: the active segment's files must hold all its entries too.
	checkFiles := func(t *testing.T, e *env, l *Log, what string, exact bool) {
		t.Helper()
		for i, s := range l.segs {
			wantIdx, wantT := encodedIndexes(s)
			gotIdx, _ := e.fs.ReadFile(s.idxPath())
			gotT, _ := e.fs.ReadFile(s.tidxPath())
			sealed := i < len(l.segs)-1
			same := func(got, want []byte) bool {
				if sealed || exact {
					return bytes.Equal(got, want)
				}
				return bytes.HasPrefix(want, got)
			}
			if !same(gotIdx, wantIdx) {
				t.Fatalf("%s: segment %d .index = %d bytes, want %d bytes of %d entries", what, i, len(gotIdx), len(wantIdx), len(s.index))
			}
			if !same(gotT, wantT) {
				t.Fatalf("%s: segment %d .timeindex = %d bytes, want %d bytes of %d entries", what, i, len(gotT), len(wantT), len(s.tindex))
			}
			if sealed && (s.idxF != nil || s.tidxF != nil) {
				t.Fatalf("%s: sealed segment %d still holds its index files open", what, i)
			}
		}
	}
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			e := newEnv(t)
			e.opts.SegmentBytes = 6 << 10
			e.opts.IndexIntervalBytes = 100 // an entry on most frames
			l := e.open()
			g := &gen{}
			var all []*raft.Log
			for i := range 120 {
				b := g.batch(1, 60) // one entry per call, as raft does under load
				mustStore(t, l, b)
				all = append(all, b...)
				checkFiles(t, e, l, fmt.Sprintf("after store %d", i), false)
			}
			if len(l.segs) < 2 {
				t.Fatalf("want a roll, have %d segments", len(l.segs))
			}
			// Conflict truncation rewrites the active segment's indexes.
			if err := l.DeleteRange(all[len(all)-7].Index, all[len(all)-1].Index); err != nil {
				t.Fatal(err)
			}
			all = all[:len(all)-7]
			checkFiles(t, e, l, "after tail truncation", true)
			g = &gen{index: all[len(all)-1].Index, next: l.NextOffset(), ts: 100000}
			for i := range 30 {
				b := g.batch(1, 60)
				mustStore(t, l, b)
				all = append(all, b...)
				checkFiles(t, e, l, fmt.Sprintf("after store %d past truncation", i), false)
			}
			want := readAll_(t, l, 0, l.NextOffset(), 1<<30)
			wantTs, _ := l.OffsetForTimestamp(500)
			if crash {
				// Every StoreLogs synced: all entries survive; the active
				// segment's index files were never synced and are rebuilt.
				crashed := e.fs.Crash()
				l.Close()
				e.fs = crashed
			} else if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = e.open()
			defer l.Close()
			checkRange(t, l, 1, all[len(all)-1].Index)
			checkEntries(t, l, all)
			checkFiles(t, e, l, "after reopen", true)
			if got := readAll_(t, l, 0, l.NextOffset(), 1<<30); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatal("Read after reopen differs")
			}
			if ts, _ := l.OffsetForTimestamp(500); ts != wantTs {
				t.Fatalf("OffsetForTimestamp = %d, want %d", ts, wantTs)
			}
			// Appending after the reopen leaves the files a prefix again.
			for range 5 {
				mustStore(t, l, g.batch(1, 60))
			}
			checkFiles(t, e, l, "after appending past reopen", false)
		})
	}
}

// TestGetLogServesNewestSmallEntriesFromMemory: the newest recentBodies
// entries of at most recentBodyMax bytes are read back from memory (they
// survive their frames being overwritten on disk), others from disk; what
// GetLog returns is the same either way and a copy the caller owns, and a
// tail truncation never lets a replaced entry be served.
func TestGetLogServesNewestSmallEntriesFromMemory(t *testing.T) {
	// fill stores entries 1..20, entry 18 too large to keep in memory.
	fill := func(t *testing.T) (*Log, []*raft.Log) {
		e := newEnv(t)
		e.opts.SegmentBytes = 1 << 20
		l := e.open()
		var all []*raft.Log
		for i := uint64(1); i <= 20; i++ {
			payload := 100
			if i == 18 {
				payload = recentBodyMax + 1
			}
			c := cmd(i, 3, int64(i-1), 1, int64(i), payload)
			c.AppendedAt = time.Unix(1700000000, int64(i))
			if i%4 == 0 {
				c.Extensions = []byte("ext")
			}
			mustStore(t, l, []*raft.Log{c})
			all = append(all, c)
		}
		checkEntries(t, l, all)
		return l, all
	}

	t.Run("served from memory", func(t *testing.T) {
		l, all := fill(t)
		defer l.Close()
		var got raft.Log
		if err := l.GetLog(20, &got); err != nil {
			t.Fatal(err)
		}
		got.Data[30] ^= 0xff // the caller's copy
		checkEntries(t, l, all[19:])
		// Overwrite every frame on disk: memory still has 13–17, 19 and 20.
		s := l.segs[0]
		if _, err := s.f.WriteAt(make([]byte, s.size), 0); err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i <= 20; i++ {
			err := l.GetLog(i, &got)
			fromMemory := i > 20-recentBodies && i != 18
			switch {
			case fromMemory && err != nil:
				t.Fatalf("GetLog(%d) = %v, want it served from memory", i, err)
			case fromMemory:
				checkEntries(t, l, all[i-1:i])
			case err == nil:
				t.Fatalf("GetLog(%d) succeeded over a zeroed frame: not read from disk", i)
			}
		}
	})

	t.Run("tail truncation", func(t *testing.T) {
		l, all := fill(t)
		defer l.Close()
		if err := l.DeleteRange(19, 20); err != nil {
			t.Fatal(err)
		}
		var got raft.Log
		if err := l.GetLog(19, &got); err != raft.ErrLogNotFound {
			t.Fatalf("GetLog(19) after truncation = %v, want ErrLogNotFound", err)
		}
		all = append(all[:18], cmd(19, 4, 18, 1, 19, 50), cmd(20, 4, 19, 1, 20, 60))
		mustStore(t, l, all[18:])
		checkEntries(t, l, all)
	})
}

// TestReset: Reset empties the log and sets the data offset a first entry
// without records starts at; the log then takes any raft index, and the
// new state survives a reopen.
func TestReset(t *testing.T) {
	e := newEnv(t)
	l := e.open()
	g := &gen{}
	for range 5 {
		mustStore(t, l, g.batch(10, 100))
	}
	if err := l.Reset(500); err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 0, 0)
	if l.StartOffset() != 500 || l.NextOffset() != 500 || l.Size() != 0 {
		t.Fatalf("after Reset: start %d next %d size %d, want 500 500 0", l.StartOffset(), l.NextOffset(), l.Size())
	}
	nb := []*raft.Log{noop(900, 7), cmd(901, 7, 500, 3, 6000, 20), cmd(902, 7, 503, 2, 6001, 20)}
	mustStore(t, l, nb)
	if err := l.StoreLogs([]*raft.Log{cmd(903, 7, 600, 1, 6002, 20)}); !errors.Is(err, ErrNonContiguous) {
		t.Fatalf("an offset gap after Reset = %v, want ErrNonContiguous", err)
	}
	l.Close()
	l = e.open()
	defer l.Close()
	checkRange(t, l, 900, 902)
	checkEntries(t, l, nb)
	if l.StartOffset() != 500 || l.NextOffset() != 505 {
		t.Fatalf("after reopen: start %d next %d, want 500 505", l.StartOffset(), l.NextOffset())
	}
}
