package logstore

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// gateFS holds every file Sync while armed until release, and can fail
// them.
type gateFS struct {
	*MemFS
	mu      sync.Mutex
	armed   bool
	release chan struct{}
	failing error
	misuse  error // set when a file was closed under an in-flight sync

	// holdOne: the next Sync (only that one) signals entered and waits
	// for release.
	one     bool
	entered chan struct{}
}

// holdOne holds the next Sync of any file until open; later ones pass.
func (g *gateFS) holdOne() {
	g.mu.Lock()
	g.one, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := g.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, g: g}, nil
}

func (g *gateFS) hold() {
	g.mu.Lock()
	g.armed, g.release = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gateFS) open(err error) {
	g.mu.Lock()
	g.armed, g.one, g.failing = false, false, err
	close(g.release)
	g.mu.Unlock()
}

type gateFile struct {
	File
	g      *gateFS
	closed atomic.Bool
}

// errSyncAfterClose is what a gateFile's Sync returns, and records in
// gateFS.misuse, when its file was closed while the sync waited.
var errSyncAfterClose = errors.New("sync of a file closed while the sync was in flight")

func (f *gateFile) Sync() error {
	f.g.mu.Lock()
	armed, release := f.g.armed, f.g.release
	if f.g.one {
		f.g.one, armed = false, true
		close(f.g.entered)
	}
	f.g.mu.Unlock()
	if armed {
		<-release
	}
	f.g.mu.Lock()
	defer f.g.mu.Unlock()
	if f.closed.Load() {
		f.g.misuse = errSyncAfterClose
		return errSyncAfterClose
	}
	if f.g.failing != nil {
		return f.g.failing
	}
	return f.File.Sync()
}

func (f *gateFile) Close() error {
	f.closed.Store(true)
	return f.File.Close()
}

// openGatedFunc opens a log in a fresh environment whose files' syncs g
// can hold.
type openGatedFunc func(t *testing.T) (*env, *gateFS, *Log)

// bothSyncPaths runs test twice: with a log that syncs on its own (a
// deferred sync on a goroutine of its own) and with one that syncs through
// a Syncer (a deferred sync by SyncThen, finished on the Syncer's
// goroutine).
func bothSyncPaths(t *testing.T, test func(t *testing.T, openGated openGatedFunc)) {
	for _, withSyncer := range []bool{false, true} {
		t.Run(map[bool]string{false: "own", true: "Syncer"}[withSyncer], func(t *testing.T) {
			test(t, func(t *testing.T) (*env, *gateFS, *Log) {
				t.Helper()
				e := newEnv(t)
				g := &gateFS{MemFS: e.fs}
				o := e.opts
				o.FS = g
				if withSyncer {
					s := NewSyncer(nil)
					t.Cleanup(s.Close)
					o.Syncer = s
				}
				l, err := Open(o)
				if err != nil {
					t.Fatal(err)
				}
				return e, g, l
			})
		})
	}
}

func waitAsync(l *Log, index uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.WaitDurable(index) }()
	return ch
}

func notYet(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) before the sync", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

// A deferred StoreLogs returns before its sync; WaitDurable returns once
// the sync is done; a crash before it loses exactly the deferred entries.
func TestDeferredSync(t *testing.T) {
	bothSyncPaths(t, func(t *testing.T, openGated openGatedFunc) {
		e, g, l := openGated(t)
		var gn gen
		mustStore(t, l, gn.batch(3, 10)) // synced as StoreLogs returns
		if err := l.WaitDurable(3); err != nil {
			t.Fatal(err)
		}
		l.SetDeferSync(true)
		g.hold()
		mustStore(t, l, gn.batch(4, 10)) // returns with its sync held
		checkRange(t, l, 1, 7)
		w := waitAsync(l, 7)
		notYet(t, w, "deferred entries")
		if err := l.WaitDurable(3); err != nil {
			t.Fatalf("earlier entries: %v", err)
		}

		// A crash now keeps only the first three entries.
		e2 := &env{t: t, fs: e.fs.Crash(), opts: e.opts}
		crashed := e2.open()
		checkRange(t, crashed, 1, 3)
		crashed.Close()

		g.open(nil)
		if err := <-w; err != nil {
			t.Fatalf("after the sync: %v", err)
		}
		e3 := &env{t: t, fs: e.fs.Crash(), opts: e.opts}
		after := e3.open()
		checkRange(t, after, 1, 7)
		after.Close()
		l.Close()
	})
}

// Turning deferral off makes what was stored durable before it returns,
// and later StoreLogs sync again.
func TestDeferSyncOffFlushes(t *testing.T) {
	bothSyncPaths(t, func(t *testing.T, openGated openGatedFunc) {
		e, g, l := openGated(t)
		defer l.Close()
		var gn gen
		l.SetDeferSync(true)
		g.hold()
		mustStore(t, l, gn.batch(4, 10))
		off := make(chan error, 1)
		go func() { off <- l.SetDeferSync(false) }()
		notYet(t, off, "SetDeferSync(false)")
		g.open(nil)
		if err := <-off; err != nil {
			t.Fatal(err)
		}
		if err := l.WaitDurable(4); err != nil {
			t.Fatal(err)
		}
		mustStore(t, l, gn.batch(2, 10))
		e2 := &env{t: t, fs: e.fs.Crash(), opts: e.opts}
		c := e2.open()
		checkRange(t, c, 1, 6) // the synchronous store was durable on return
		c.Close()
	})
}

// A failed deferred sync fails every wait past the durable entries for
// good; closing fails the rest.
func TestDeferredSyncFailure(t *testing.T) {
	bothSyncPaths(t, func(t *testing.T, openGated openGatedFunc) {
		_, g, l := openGated(t)
		var gn gen
		mustStore(t, l, gn.batch(2, 10))
		l.SetDeferSync(true)
		g.hold()
		mustStore(t, l, gn.batch(2, 10))
		w := waitAsync(l, 4)
		boom := errors.New("disk on fire")
		g.open(boom)
		if err := <-w; !errors.Is(err, boom) {
			t.Fatalf("WaitDurable after a failed sync: %v, want %v", err, boom)
		}
		if err := l.WaitDurable(2); err != nil {
			t.Fatalf("entries durable before the failure: %v", err)
		}
		l.Close()
		if err := l.WaitDurable(5); !errors.Is(err, boom) {
			t.Fatalf("after close: %v, want the first failure", err)
		}
	})
}

// Entries deleted from the tail are no longer durable, whatever a sync
// of them started earlier reports.
func TestDeferredSyncTailDeleted(t *testing.T) {
	e := newEnv(t)
	l := e.open()
	defer l.Close()
	var gn gen
	mustStore(t, l, gn.batch(6, 10))
	if err := l.DeleteRange(5, 6); err != nil {
		t.Fatal(err)
	}
	w := waitAsync(l, 5)
	notYet(t, w, "deleted entries")
	gn.index = 4 // index 5 again (a noop), synced as it is stored
	mustStore(t, l, gn.batch(1, 10))
	if err := <-w; err != nil {
		t.Fatal(err)
	}
}

// Close and DeleteRange wait for deferred syncs in flight before they
// close a segment file: a sync never runs on a closed (or reused)
// descriptor. (DeleteBefore waits the same way; it deletes only sealed
// segments, and sealing syncs in place, so no gate here can hold a sync of
// one.)
func TestDeferredSyncOutlivesNoFile(t *testing.T) {
	bothSyncPaths(t, func(t *testing.T, openGated openGatedFunc) {
		for _, tc := range []struct {
			name string
			op   func(l *Log) error
		}{
			{"Close", func(l *Log) error { return l.Close() }},
			{"DeleteRange of everything", func(l *Log) error { return l.DeleteRange(1, 8) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, g, l := openGated(t)
				defer l.Close()
				var gn gen
				mustStore(t, l, gn.batch(4, 10))
				l.SetDeferSync(true)
				g.holdOne()
				mustStore(t, l, gn.batch(4, 10))
				<-g.entered // the deferred sync is in flight, held; other syncs pass
				done := make(chan error, 1)
				go func() { done <- tc.op(l) }()
				select {
				case err := <-done:
					t.Fatalf("%s returned (%v) while a deferred sync was in flight", tc.name, err)
				case <-time.After(50 * time.Millisecond):
				}
				g.open(nil)
				if err := <-done; err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				g.mu.Lock()
				defer g.mu.Unlock()
				if g.misuse != nil {
					t.Fatal(g.misuse)
				}
			})
		}
	})
}

// SetDeferWhen defers the syncs of exactly the StoreLogs it says to;
// PendingSync names the first entry whose sync is pending and WaitSynced
// waits for those syncs only, never for entries stored without deferral
// (or deleted since).
func TestDeferWhen(t *testing.T) {
	bothSyncPaths(t, func(t *testing.T, openGated openGatedFunc) {
		_, g, l := openGated(t)
		defer l.Close()
		var gn gen
		var leading atomic.Bool
		var asked atomic.Int32
		l.SetDeferWhen(func(logs []*raft.Log) bool {
			asked.Add(1)
			return leading.Load()
		})
		mustStore(t, l, gn.batch(3, 10))
		if p := l.PendingSync(); p != 0 {
			t.Fatalf("PendingSync after synced entries: %d, want 0", p)
		}
		if asked.Load() != 1 {
			t.Fatalf("the rule was asked %d times for one StoreLogs", asked.Load())
		}

		leading.Store(true)
		g.hold()
		mustStore(t, l, gn.batch(4, 10)) // 4..7 return with their sync held
		if p := l.PendingSync(); p != 4 {
			t.Fatalf("PendingSync with 4..7 held: %d, want 4", p)
		}
		if err := l.WaitSynced(3); err != nil {
			t.Fatalf("WaitSynced of synced entries: %v", err)
		}
		w7, w100 := waitSyncedAsync(l, 7), waitSyncedAsync(l, 100)
		notYet(t, w7, "WaitSynced(7)")
		notYet(t, w100, "WaitSynced(100)")

		// A StoreLogs the rule does not defer syncs before it returns; the
		// sync covers the deferred entries before it.
		leading.Store(false)
		stored := make(chan error, 1)
		go func() { stored <- l.StoreLogs(gn.batch(1, 10)) }()
		notYet(t, stored, "StoreLogs without deferral")
		g.open(nil)
		for _, ch := range []<-chan error{stored, w7, w100} {
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
		}
		if p := l.PendingSync(); p != 0 {
			t.Fatalf("PendingSync after the syncs: %d, want 0", p)
		}
		if err := l.WaitDurable(8); err != nil {
			t.Fatal(err)
		}

		// Entries deleted are waited for no more, even though WaitDurable
		// would now wait for a later StoreLogs.
		if err := l.DeleteRange(1, 8); err != nil {
			t.Fatal(err)
		}
		if err := l.WaitSynced(8); err != nil {
			t.Fatalf("WaitSynced of deleted entries: %v", err)
		}
		if p := l.PendingSync(); p != 0 {
			t.Fatalf("PendingSync of an empty log: %d, want 0", p)
		}
	})
}

func waitSyncedAsync(l *Log, index uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.WaitSynced(index) }()
	return ch
}
