package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/raftmeta"
)

func TestAppendDenseOffsets(t *testing.T) {
	r := openSingle(t, t.TempDir(), nil)
	defer r.Close()
	ctx := context.Background()
	var want int64
	for i := 0; i < 20; i++ {
		var batches [][]byte
		var total int32
		for j := 0; j <= i%3; j++ {
			c := int32(1 + (i+j)%4)
			batches = append(batches, makeBatch(c, fmt.Sprintf("body-%d-%d", i, j)))
			total += c
		}
		base, count, err := r.Append(ctx, batches, 7, int32(i))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if base != want || count != total {
			t.Fatalf("append %d: got (%d,%d), want (%d,%d)", i, base, count, want, total)
		}
		want += int64(total)
	}
	if hw := r.HighWatermark(); hw != want {
		t.Fatalf("high watermark %d, want %d", hw, want)
	}
	got := fetchAll(t, r)
	idx := index(t, got)
	if len(idx) != 20 {
		t.Fatalf("fetched %d distinct requests, want 20", len(idx))
	}
	for k, bases := range idx {
		if k.w != 7 || len(bases) != 1+int(k.s)%3 {
			t.Fatalf("request %+v stored as %d batches at %v", k, len(bases), bases)
		}
	}
}

func TestAppendRejectsBadInput(t *testing.T) {
	r := openSingle(t, t.TempDir(), func(c *Config) { c.Raft.MaxEntryBytes = 4096 })
	defer r.Close()
	ctx := context.Background()
	corrupt := makeBatch(1, "x")
	corrupt[len(corrupt)-1] ^= 0xff
	big := makeBatch(1, string(make([]byte, 5000)))
	tests := []struct {
		name    string
		batches [][]byte
		want    error
	}{
		{"none", nil, ErrInvalidBatch},
		{"crc", [][]byte{corrupt}, ErrInvalidBatch},
		{"truncated", [][]byte{makeBatch(1, "abc")[:40]}, ErrInvalidBatch},
		{"trailing", [][]byte{append(makeBatch(1, "abc"), 0)}, ErrInvalidBatch},
		{"too large", [][]byte{big}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := r.Append(ctx, tt.batches, 0, 0)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %s, want %v", errString(err), tt.want)
			}
		})
	}
	if hw := r.HighWatermark(); hw != 0 {
		t.Fatalf("rejected appends stored data: hw %d", hw)
	}
}

func TestReopenKeepsAcknowledged(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snapshot), func(t *testing.T) { testReopen(t, snapshot) })
	}
}

// testReopen appends, optionally snapshots midway (so the restart restores
// the snapshot and replays only the entries after it), closes and reopens.
func testReopen(t *testing.T, snapshot bool) {
	dir := t.TempDir()
	r := openSingle(t, dir, nil)
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		if _, _, err := r.Append(ctx, [][]byte{makeBatch(2, fmt.Sprint(i))}, 1, int32(i)); err != nil {
			t.Fatal(err)
		}
		if snapshot && i == 30 {
			if err := r.Raft().Snapshot().Error(); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
		}
	}
	before := fetchAll(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Append(ctx, [][]byte{makeBatch(1, "x")}, 0, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %s, want ErrClosed", errString(err))
	}

	r = openSingle(t, dir, func(c *Config) { c.Bootstrap = nil })
	defer r.Close()
	waitFor(t, 10*time.Second, func() error {
		if hw := r.HighWatermark(); hw != 100 {
			return fmt.Errorf("hw %d after reopen, want 100", hw)
		}
		return nil
	})
	after := fetchAll(t, r)
	if len(after) != len(before) {
		t.Fatalf("%d batches after reopen, %d before", len(after), len(before))
	}
	for i := range before {
		if !bytes.Equal(before[i], after[i]) {
			t.Fatalf("batch %d differs after reopen", i)
		}
	}
	// The writer table survived: a retry is answered, a new seq continues.
	base, count, err := r.Append(ctx, [][]byte{makeBatch(2, "retry")}, 1, 49)
	if err != nil || base != 98 || count != 2 {
		t.Fatalf("retry after reopen: (%d,%d,%v), want (98,2,nil)", base, count, err)
	}
	base, _, err = r.Append(ctx, [][]byte{makeBatch(1, "new")}, 1, 50)
	if err != nil || base != 100 {
		t.Fatalf("append after reopen: (%d,%v), want base 100", base, err)
	}
}

// copyDir copies a live replica directory file by file, as a crash would
// leave it (files caught mid-write, no Close).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walk (temp files)
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

func TestCrashCopyKeepsAcknowledged(t *testing.T) {
	dir := t.TempDir()
	r := openSingle(t, dir, func(c *Config) { c.Log.SegmentBytes = 64 << 10 })
	ctx := context.Background()
	const writers, perWriter = 8, 60
	var mu sync.Mutex
	acked := map[ws]int64{}
	var ackedBeforeCopy map[ws]int64
	var wg sync.WaitGroup
	for w := 1; w <= writers; w++ {
		wg.Go(func() {
			for s := 0; s < perWriter; s++ {
				base, _, err := r.Append(ctx, [][]byte{makeBatch(1, fmt.Sprintf("w%d-s%d", w, s))}, int64(w), int32(s))
				if err != nil {
					t.Errorf("append w%d s%d: %v", w, s, err)
					return
				}
				mu.Lock()
				acked[ws{int64(w), int32(s)}] = base
				mu.Unlock()
			}
		})
	}
	crashDir := t.TempDir()
	waitFor(t, 20*time.Second, func() error {
		if hw := r.HighWatermark(); hw < writers*perWriter/3 {
			return fmt.Errorf("hw %d", hw)
		}
		return nil
	})
	mu.Lock()
	ackedBeforeCopy = make(map[ws]int64, len(acked))
	for k, v := range acked {
		ackedBeforeCopy[k] = v
	}
	mu.Unlock()
	copyDir(t, dir, crashDir)
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	c := openSingle(t, crashDir, func(c *Config) { c.Bootstrap = nil })
	defer c.Close()
	// The copy's own last entries become committed once it leads again.
	waitFor(t, 10*time.Second, func() error {
		if hw := c.HighWatermark(); hw < int64(len(ackedBeforeCopy)) {
			return fmt.Errorf("hw %d below %d acknowledged before the copy", hw, len(ackedBeforeCopy))
		}
		return nil
	})
	got := index(t, fetchAll(t, c))
	for k, base := range ackedBeforeCopy {
		bases := got[k]
		if len(bases) != 1 || bases[0] != base {
			t.Fatalf("acknowledged %+v at %d: after crash stored at %v", k, base, bases)
		}
	}
	for k, bases := range got {
		if len(bases) != 1 {
			t.Fatalf("%+v stored %d times", k, len(bases))
		}
	}
	t.Logf("acked before copy %d, in copy %d, total acked %d", len(ackedBeforeCopy), len(got), len(acked))
}

func TestIdempotentRetry(t *testing.T) {
	r := openSingle(t, t.TempDir(), nil)
	defer r.Close()
	ctx := context.Background()
	app := func(w int64, s int32, body string) (int64, int32, error) {
		return r.Append(ctx, [][]byte{makeBatch(3, body)}, w, s)
	}
	// Applied retry.
	for s := int32(0); s < 7; s++ {
		base, _, err := app(5, s, "a")
		if err != nil || base != int64(s)*3 {
			t.Fatalf("seq %d: base %d err %v", s, base, err)
		}
	}
	hw := r.HighWatermark()
	t.Run("applied retry", func(t *testing.T) {
		base, count, err := app(5, 4, "retry")
		if err != nil || base != 12 || count != 3 {
			t.Fatalf("retry: (%d,%d,%v), want (12,3,nil)", base, count, err)
		}
	})
	t.Run("older than window", func(t *testing.T) {
		if _, _, err := app(5, 1, "old"); !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("err %s, want ErrOutOfOrderSequence", errString(err))
		}
	})
	if got := r.HighWatermark(); got != hw {
		t.Fatalf("retries stored data: hw %d -> %d", hw, got)
	}

	t.Run("in flight retry", func(t *testing.T) {
		// Hold the proposer so the original and its retry are queued
		// together: the retry finds the original in flight.
		release := make(chan struct{})
		r.hookBeforeDrain = func() { <-release }
		defer func() { r.hookBeforeDrain = nil }()
		type res struct {
			base  int64
			count int32
			err   error
		}
		results := make(chan res, 3)
		for i := 0; i < 3; i++ {
			go func() {
				b, c, err := app(9, 100, fmt.Sprint("attempt", i))
				results <- res{b, c, err}
			}()
			waitFor(t, 5*time.Second, func() error {
				if q := r.queued(); q != i+1 {
					return fmt.Errorf("%d queued", q)
				}
				return nil
			})
		}
		close(release)
		first := <-results
		for i := 0; i < 2; i++ {
			if got := <-results; got != first || got.err != nil {
				t.Fatalf("attempts differ: %+v vs %+v", got, first)
			}
		}
		if first.base != hw || first.count != 3 {
			t.Fatalf("in-flight result (%d,%d), want (%d,3)", first.base, first.count, hw)
		}
		if n := r.parked.Load(); n != 2 {
			t.Fatalf("%d retries parked on the in-flight original, want 2", n)
		}
	})
	got := index(t, fetchAll(t, r))
	for k, bases := range got {
		if len(bases) != 1 {
			t.Fatalf("%+v stored %d times", k, len(bases))
		}
	}
	if len(got) != 8 {
		t.Fatalf("%d requests stored, want 8", len(got))
	}
}

func TestGroupCommitPacksRequests(t *testing.T) {
	tests := []struct {
		name        string
		maxEntry    int
		requests    int
		wantEntries uint64
	}{
		{"one entry", 0, 100, 1},
		{"split by size", 10 * len(makeBatch(1, "req-00")), 100, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := openSingle(t, t.TempDir(), func(c *Config) { c.Raft.MaxEntryBytes = tt.maxEntry })
			defer r.Close()
			_, entriesBefore := r.stats()
			release := make(chan struct{})
			r.hookBeforeDrain = func() { <-release }
			var wg sync.WaitGroup
			bases := make([]int64, tt.requests)
			for i := 0; i < tt.requests; i++ {
				wg.Go(func() {
					b, _, err := r.Append(context.Background(), [][]byte{makeBatch(1, fmt.Sprintf("req-%02d", i%100))}, int64(i+1), 0)
					if err != nil {
						t.Errorf("append %d: %v", i, err)
					}
					bases[i] = b
				})
			}
			waitFor(t, 10*time.Second, func() error {
				if q := r.queued(); q != tt.requests {
					return fmt.Errorf("%d queued", q)
				}
				return nil
			})
			close(release)
			wg.Wait()
			_, entries := r.stats()
			if got := entries - entriesBefore; got != tt.wantEntries || got >= uint64(tt.requests) {
				t.Fatalf("%d requests in %d entries, want %d", tt.requests, got, tt.wantEntries)
			}
			seen := map[int64]bool{}
			for _, b := range bases {
				if b < 0 || b >= int64(tt.requests) || seen[b] {
					t.Fatalf("bases not a permutation of 0..%d: %v", tt.requests-1, bases)
				}
				seen[b] = true
			}
		})
	}
}

func TestQueueBound(t *testing.T) {
	r := openSingle(t, t.TempDir(), func(c *Config) { c.Raft.MaxQueuedRequests = 2 })
	defer r.Close()
	release := make(chan struct{})
	r.hookBeforeDrain = func() { <-release }
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Go(func() {
			if _, _, err := r.Append(context.Background(), [][]byte{makeBatch(1, "q")}, 0, 0); err != nil {
				t.Errorf("queued append: %v", err)
			}
		})
	}
	waitFor(t, 5*time.Second, func() error {
		if q := r.queued(); q != 2 {
			return fmt.Errorf("%d queued", q)
		}
		return nil
	})
	if _, _, err := r.Append(context.Background(), [][]byte{makeBatch(1, "q")}, 0, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("third append: %s, want ErrBusy", errString(err))
	}
	close(release)
	wg.Wait()
}

// MaxQueuedBytes bounds what waits behind queued requests; a request alone
// is taken however large (MaxEntryBytes bounds it), or it could never be.
func TestQueueBytesBound(t *testing.T) {
	r := openSingle(t, t.TempDir(), func(c *Config) { c.Raft.MaxQueuedBytes = 1000 })
	defer r.Close()
	release := make(chan struct{})
	r.hookBeforeDrain = func() { <-release }
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Append(context.Background(), [][]byte{makeBatch(1, string(make([]byte, 2000)))}, 0, 0)
		done <- err
	}()
	waitFor(t, 5*time.Second, func() error {
		if q := r.queued(); q != 1 {
			return fmt.Errorf("%d queued", q)
		}
		return nil
	})
	if _, _, err := r.Append(context.Background(), [][]byte{makeBatch(1, "q")}, 0, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("append behind %d queued bytes: %s, want ErrBusy", 2000, errString(err))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("a lone request larger than MaxQueuedBytes: %s", errString(err))
	}
}

func TestFetch(t *testing.T) {
	r := openSingle(t, t.TempDir(), nil)
	defer r.Close()
	ctx := context.Background()
	if _, _, err := r.Append(ctx, [][]byte{makeBatch(2, "a"), makeBatch(3, "b")}, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Run("out of range", func(t *testing.T) {
		for _, off := range []int64{-1, 1000} {
			if _, _, _, err := r.Fetch(ctx, off, 0, 0); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("Fetch(%d): %s, want ErrOffsetOutOfRange", off, errString(err))
			}
		}
	})
	t.Run("mid batch", func(t *testing.T) {
		bs, hw, start, err := r.Fetch(ctx, 3, 0, 0)
		if err != nil || hw != 5 || start != 0 || len(bs) != 1 {
			t.Fatalf("Fetch(3): %d batches hw %d start %d err %v", len(bs), hw, start, err)
		}
		if h, _, _ := peekBatch(bs[0]); h.Base != 2 || h.Count != 3 {
			t.Fatalf("Fetch(3) returned batch at %d (%d records), want the batch at 2", h.Base, h.Count)
		}
		// The caller owns what Fetch returns: scribbling on it changes nothing stored.
		keep := bytes.Clone(bs[0])
		for i := range bs[0] {
			bs[0][i] = 0
		}
		again, _, _, err := r.Fetch(ctx, 3, 0, 0)
		if err != nil || len(again) != 1 || !bytes.Equal(again[0], keep) {
			t.Fatalf("refetch after modifying the returned batch: %v", err)
		}
	})
	t.Run("at hw times out empty", func(t *testing.T) {
		bs, hw, _, err := r.Fetch(ctx, 5, 0, 20*time.Millisecond)
		if err != nil || len(bs) != 0 || hw != 5 {
			t.Fatalf("Fetch(hw): %d batches hw %d err %v", len(bs), hw, err)
		}
	})
	t.Run("long poll wakes on append", func(t *testing.T) {
		type res struct {
			bs  [][]byte
			err error
		}
		done := make(chan res, 1)
		go func() {
			bs, _, _, err := r.Fetch(ctx, 5, 0, time.Minute)
			done <- res{bs, err}
		}()
		if _, _, err := r.Append(ctx, [][]byte{makeBatch(4, "late")}, 0, 0); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if got.err != nil || len(got.bs) != 1 {
			t.Fatalf("long poll: %d batches, err %v", len(got.bs), got.err)
		}
		if h, _, _ := peekBatch(got.bs[0]); h.Base != 5 || h.Count != 4 {
			t.Fatalf("long poll batch (%d,%d), want (5,4)", h.Base, h.Count)
		}
	})
	t.Run("context cancel", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, _, _, err := r.Fetch(cctx, r.HighWatermark(), 0, time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("Fetch with cancelled ctx: %s", errString(err))
		}
	})
	t.Run("maxBytes", func(t *testing.T) {
		bs, _, _, err := r.Fetch(ctx, 0, 1, 0)
		if err != nil || len(bs) != 1 {
			t.Fatalf("Fetch(0, maxBytes 1): %d batches, err %v", len(bs), err)
		}
	})
	t.Run("timestamp", func(t *testing.T) {
		if off := r.OffsetForTimestamp(0); off != 0 {
			t.Fatalf("OffsetForTimestamp(0) = %d, want 0", off)
		}
		if off := r.OffsetForTimestamp(time.Now().Add(time.Hour).UnixMilli()); off != r.HighWatermark() {
			t.Fatalf("OffsetForTimestamp(future) = %d, want hw %d", off, r.HighWatermark())
		}
	})
}

func TestCloseWakesFetch(t *testing.T) {
	r := openSingle(t, t.TempDir(), nil)
	done := make(chan error, 1)
	go func() {
		_, _, _, err := r.Fetch(context.Background(), 0, 0, time.Minute)
		done <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("fetch during close: %v", err)
	}
}

func TestRetention(t *testing.T) {
	r := openSingle(t, t.TempDir(), func(c *Config) { c.Log.SegmentBytes = 4 << 10 })
	defer r.Close()
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		if _, _, err := r.Append(ctx, [][]byte{makeBatch(1, string(make([]byte, 500)))}, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.EnforceRetention(time.Hour, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	if s := r.LogStartOffset(); s != 0 {
		t.Fatalf("1h retention moved log start to %d", s)
	}
	// Everything is older than "now + 1ms" once the clock moves on: use a
	// tiny ttl and wait until the cutoff passes the newest record. First
	// with keepFrom 20: only segments wholly below offset 20 go.
	waitFor(t, 5*time.Second, func() error {
		if err := r.EnforceRetention(time.Nanosecond, 20); err != nil {
			return err
		}
		if s := r.LogStartOffset(); s == 0 {
			return errors.New("log start still 0")
		}
		return nil
	})
	if s := r.LogStartOffset(); s > 20 {
		t.Fatalf("retention kept from 20 moved the log start to %d", s)
	}
	kept := r.LogStartOffset()
	if err := r.EnforceRetention(time.Nanosecond, math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	start := r.LogStartOffset()
	if start <= kept {
		t.Fatalf("retention without a bound left the log start at %d", start)
	}
	if _, _, _, err := r.Fetch(ctx, start-1, 0, 0); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Fetch below log start: %s", errString(err))
	}
	if bs, _, _, err := r.Fetch(ctx, start, 0, 0); err != nil || len(bs) == 0 {
		t.Fatalf("Fetch at log start %d: %d batches, %v", start, len(bs), err)
	}
}

// gatedLog holds StoreLogs while armed, so an entry stays in flight.
type gatedLog struct {
	*logstore.Log
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedLog) StoreLogs(logs []*raft.Log) error {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.Log.StoreLogs(logs)
}

func (g *gatedLog) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

func TestRetryOfProposedEntryWaitsForOriginal(t *testing.T) {
	g := &gatedLog{entered: make(chan struct{}), release: make(chan struct{})}
	r := openSingle(t, t.TempDir(), func(c *Config) {
		c.openLog = func(dir string) (dataLog, error) {
			l, err := logstore.Open(logstore.Options{Dir: dir, OffsetFunc: EntryOffsets})
			g.Log = l
			return g, err
		}
	})
	defer r.Close()
	ctx := context.Background()
	if _, _, err := r.Append(ctx, [][]byte{makeBatch(1, "first")}, 0, 0); err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	type res struct {
		base  int64
		count int32
		err   error
	}
	orig, retry := make(chan res, 1), make(chan res, 1)
	go func() {
		b, c, err := r.Append(ctx, [][]byte{makeBatch(2, "orig")}, 42, 7)
		orig <- res{b, c, err}
	}()
	<-g.entered // the original's entry is in raft, being stored
	go func() {
		b, c, err := r.Append(ctx, [][]byte{makeBatch(2, "retry")}, 42, 7)
		retry <- res{b, c, err}
	}()
	waitFor(t, 5*time.Second, func() error {
		if n := r.parked.Load(); n != 1 {
			return fmt.Errorf("%d retries parked on the original", n)
		}
		select {
		case got := <-retry:
			return fmt.Errorf("retry answered before the original committed: %+v", got)
		default:
		}
		return nil
	})
	// The proposer drained the retry; it must not be proposed again.
	_, entriesBefore := r.stats()
	close(g.release)
	o, rt := <-orig, <-retry
	if o.err != nil || o != rt || o.base != 1 || o.count != 2 {
		t.Fatalf("original %+v, retry %+v; want both (1,2,nil)", o, rt)
	}
	_, entriesAfter := r.stats()
	if entriesAfter-entriesBefore != 1 {
		t.Fatalf("%d entries applied for one request and its retry", entriesAfter-entriesBefore)
	}
	if got := index(t, fetchAll(t, r))[ws{42, 7}]; len(got) != 1 {
		t.Fatalf("(42,7) stored at %v", got)
	}
}

// A follower refuses Fetch (its applied state may lag what the leader
// acknowledged) and names the leader; FetchLocal serves it.
func TestFetchIsLeaderOnly(t *testing.T) {
	c := newTestCluster(t, 3)
	defer c.closeAll()
	ctx := context.Background()
	if _, err := c.append([][]byte{makeBatch(2, "x")}, 0, 0); err != nil {
		t.Fatal(err)
	}
	li := c.leader()
	for i, r := range c.reps {
		if i == li {
			continue
		}
		// A follower that has not heard from the new leader yet (the
		// append needed only a quorum) answers "no leader" until it does.
		waitFor(t, 5*time.Second, func() error {
			_, _, _, err := r.Fetch(ctx, 0, 0, 0)
			var nl *NotLeaderError
			if !errors.As(err, &nl) || nl.Leader != c.layout[li].ID {
				return fmt.Errorf("follower Fetch: %v, want NotLeaderError naming %s", err, c.layout[li].ID)
			}
			return nil
		})
		waitFor(t, 5*time.Second, func() error {
			bs, hw, _, err := r.FetchLocal(ctx, 0, 0, 0)
			if err != nil || hw != 2 || len(bs) != 1 {
				return fmt.Errorf("FetchLocal: %d batches, hw %d, %v", len(bs), hw, err)
			}
			return nil
		})
	}
}

// TestReadsWaitForTheBarrierAfterRestart: a restarted replica is raft
// leader before it has applied its log (its barrier has to commit first);
// until then its high watermark is behind what was acknowledged, so it
// serves no reads (Fetch, and through ServingReads the node's ListOffsets).
func TestReadsWaitForTheBarrierAfterRestart(t *testing.T) {
	dir := t.TempDir()
	r := openSingle(t, dir, nil)
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := r.Append(ctx, [][]byte{makeBatch(2, fmt.Sprint(i))}, 1, int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	g := &gatedLog{entered: make(chan struct{}), release: make(chan struct{})}
	g.armed.Store(true) // hold the new leader's first entry
	addr, tr := raft.NewInmemTransport("single")
	r, err := Open(Config{
		ID: raftmeta.BucketID{TableID: 1, Bucket: 0}, Dir: dir, LocalID: "n1", LocalAddr: addr,
		Transport: tr, Raft: testTuning(), Logger: testLogger(t),
		openLog: func(dir string) (dataLog, error) {
			l, err := logstore.Open(logstore.Options{Dir: dir, OffsetFunc: EntryOffsets})
			g.Log = l
			return g, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	released := false
	defer func() {
		if !released {
			close(g.release)
		}
	}()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted replica never stored its first entry as leader")
	}
	if !r.IsLeader() {
		t.Fatal("storing an entry, but not leader")
	}
	if hw := r.HighWatermark(); hw >= 10 {
		t.Fatalf("high watermark %d before the barrier: the test shows nothing", hw)
	}
	if err := r.ServingReads(); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("ServingReads before the barrier = %v, want ErrNoLeader (retry)", err)
	}
	if _, _, _, err := r.Fetch(ctx, 0, 0, 0); err == nil {
		t.Fatal("Fetch served before the barrier")
	}

	close(g.release)
	released = true
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.WaitLeader(wctx); err != nil {
		t.Fatal(err)
	}
	if err := r.ServingReads(); err != nil {
		t.Fatalf("ServingReads after the barrier: %v", err)
	}
	if hw := r.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d after the barrier, want 10", hw)
	}
}

// stuckFuture is a raft future that answers only when released, as one
// hashicorp/raft dropped at shutdown never does.
type stuckFuture struct{ release chan struct{} }

func (f stuckFuture) Error() error { <-f.release; return nil }

// waitRaft gives up on a future raft never answers once the replica is
// closing, so a term waiting for it cannot hold Close.
func TestWaitRaftGivesUpWhenClosing(t *testing.T) {
	r := &Replica{quit: make(chan struct{})}
	f := stuckFuture{release: make(chan struct{})}
	defer close(f.release) // let the waiting goroutine end with the test
	done := make(chan error, 1)
	go func() { done <- r.waitRaft(f) }()
	select {
	case err := <-done:
		t.Fatalf("waitRaft returned %v before the future answered or the replica closed", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(r.quit)
	select {
	case err := <-done:
		if !errors.Is(err, raft.ErrRaftShutdown) {
			t.Fatalf("waitRaft after close = %v, want raft.ErrRaftShutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waitRaft still waits on a future raft will not answer after the replica closed")
	}
}

// Bootstrap is asked for only by a replica without raft state: a node
// restarting with thousands of replicas must not pay for each one's
// configuration (the node's reads its partition directory). Its error
// fails Open and leaves no state behind.
func TestBootstrapAskedOnlyWithoutState(t *testing.T) {
	dir := t.TempDir()
	failing := func() ([]raft.Server, error) { return nil, errors.New("peer address not known yet") }
	addr, tr := raft.NewInmemTransport("single")
	_, err := Open(Config{
		ID: raftmeta.BucketID{TableID: 1, Bucket: 0}, Dir: dir, LocalID: "n1", LocalAddr: addr,
		Transport: tr, Bootstrap: failing, Raft: testTuning(), Logger: testLogger(t),
	})
	if err == nil || !strings.Contains(err.Error(), "bootstrap: peer address not known yet") {
		t.Fatalf("Open with a failing Bootstrap: %v, want its error", err)
	}

	asked := 0
	r := openSingle(t, dir, func(c *Config) {
		boot := c.Bootstrap
		c.Bootstrap = func() ([]raft.Server, error) { asked++; return boot() }
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openSingle(t, dir, func(c *Config) {
		c.Bootstrap = func() ([]raft.Server, error) { asked++; return failing() }
	})
	defer r.Close()
	if asked != 1 {
		t.Errorf("Bootstrap asked %d times over a first open and a reopen, want once (the first)", asked)
	}
}
