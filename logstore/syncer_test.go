package logstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeFile counts writes and records the write count at its last sync.
type fakeFile struct {
	written atomic.Int64
	synced  atomic.Int64
	syncs   atomic.Int64
	block   chan struct{} // if non-nil, Sync waits on it
	entered chan struct{}
}

func (f *fakeFile) Sync() error {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block != nil {
		<-f.block
	}
	f.synced.Store(f.written.Load())
	f.syncs.Add(1)
	return nil
}

func TestSyncerConcurrentCallers(t *testing.T) {
	s := NewSyncer(nil)
	defer s.Close()
	files := make([]*fakeFile, 8)
	for i := range files {
		files[i] = &fakeFile{}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := files[w%len(files)]
			for range 50 {
				n := f.written.Add(1)
				if err := s.Sync(f); err != nil {
					errs <- err
					return
				}
				if got := f.synced.Load(); got < n {
					errs <- fmt.Errorf("Sync returned with write %d not synced (synced through %d)", n, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Waits != 64*50 {
		t.Fatalf("waits = %d, want %d", st.Waits, 64*50)
	}
	var syncs int64
	for _, f := range files {
		syncs += f.syncs.Load()
	}
	if syncs != st.Files {
		t.Fatalf("files synced %d, stats say %d", syncs, st.Files)
	}
}

// TestSyncerBatchesRound blocks one round and checks that every request
// made meanwhile is served by exactly one following round.
func TestSyncerBatchesRound(t *testing.T) {
	s := NewSyncer(nil)
	defer s.Close()
	blocker := &fakeFile{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() { done <- s.Sync(blocker) }()
	<-blocker.entered // round 1 is running
	files := make([]*fakeFile, 20)
	var wg sync.WaitGroup
	for i := range files {
		files[i] = &fakeFile{}
		for range 3 { // three waiters per file
			wg.Add(1)
			go func() { defer wg.Done(); _ = s.Sync(files[i]) }()
		}
	}
	// Wait until all 60 requests are queued in round 2.
	for {
		s.mu.Lock()
		n := len(s.cur.order)
		s.mu.Unlock()
		if n == len(files) && s.Stats().Waits == 61 {
			break
		}
		runtimeGosched()
	}
	close(blocker.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if st := s.Stats(); st.Rounds != 2 || st.Files != 21 {
		t.Fatalf("stats %+v, want 2 rounds syncing 21 files", st)
	}
	for i, f := range files {
		if f.syncs.Load() != 1 {
			t.Fatalf("file %d synced %d times, want 1", i, f.syncs.Load())
		}
	}
}

func TestSyncerSyncfs(t *testing.T) {
	s := NewSyncer(nil)
	s.SyncfsThreshold = 1
	defer s.Close()
	f, err := OSFS{}.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(f); err != nil {
		t.Fatalf("syncfs: %v", err)
	}
}

// TestSyncerDefaultSyncfs: NewSyncer uses syncfs for rounds of two or more
// real files (DefaultSyncfsThreshold, chosen by BenchmarkSyncer), and every
// waiter of such a round gets a nil error.
func TestSyncerDefaultSyncfs(t *testing.T) {
	s := NewSyncer(nil)
	defer s.Close()
	if s.SyncfsThreshold != DefaultSyncfsThreshold || DefaultSyncfsThreshold < 1 {
		t.Fatalf("SyncfsThreshold = %d, want DefaultSyncfsThreshold (%d) >= 1", s.SyncfsThreshold, DefaultSyncfsThreshold)
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		f, err := OSFS{}.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		wg.Go(func() {
			for j := range 20 {
				if _, err := f.WriteAt([]byte{byte(j)}, int64(j)); err != nil {
					errs <- err
					return
				}
				if err := s.Sync(f); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Waits != 160 || st.Rounds == 0 || st.Rounds > 160 {
		t.Fatalf("stats %+v, want 160 waits in 1..160 rounds", st)
	}
}

// devFile is a real file that claims a device of the test's choosing and
// counts calls of its own Sync, which a syncfs round must not make.
type devFile struct {
	osFile
	claimed uint64
	syncs   atomic.Int64
}

func (f *devFile) Dev() uint64 { return f.claimed }
func (f *devFile) Sync() error { f.syncs.Add(1); return f.osFile.Sync() }

// TestSyncerSyncfsRound: in a syncfs round, files that name their
// filesystem's device are covered by syncfs (grouped by that device, no
// Sync of their own) and files that do not are synced one by one.
func TestSyncerSyncfsRound(t *testing.T) {
	dir := t.TempDir()
	open := func(name string, dev uint64) *devFile {
		f, err := OSFS{}.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return &devFile{osFile: f.(osFile), claimed: dev}
	}
	a, b, c := open("a", 1), open("b", 1), open("c", 2)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if a.osFile.Dev() != st.Dev {
		t.Fatalf("OSFS file Dev() = %d, want the directory's device %d", a.osFile.Dev(), st.Dev)
	}
	plain := &fakeFile{}

	s := NewSyncer(nil)
	s.SyncfsThreshold = 1
	r := newRound()
	r.order = []Syncable{a, b, c, plain}
	s.run(r)
	s.Close()
	for i, err := range r.errs {
		if err != nil {
			t.Errorf("file %d: %v", i, err)
		}
	}
	for _, f := range []*devFile{a, b, c} {
		if n := f.syncs.Load(); n != 0 {
			t.Errorf("file of device %d synced itself %d times, want 0 (syncfs covers it)", f.claimed, n)
		}
	}
	if n := plain.syncs.Load(); n != 1 {
		t.Errorf("file without a device synced %d times, want 1", n)
	}
}

// failFile is a file whose Sync fails.
type failFile struct{ err error }

func (f failFile) Sync() error { return f.err }

// SyncThen returns at once and reports each file's outcome once, after its
// sync, in the same round as Sync callers of that file; after Close it
// syncs and reports before it returns.
func TestSyncerSyncThen(t *testing.T) {
	s := NewSyncer(nil)
	blocker := &fakeFile{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	s.SyncThen(blocker, func(error) {}) // returns although its sync blocks
	<-blocker.entered                   // round 1 is running

	f := &fakeFile{}
	f.written.Store(7)
	boom := errors.New("disk on fire")
	type outcome struct {
		name string
		err  error
		seen int64 // f's writes covered by its last sync when reported
	}
	got := make(chan outcome, 4)
	s.SyncThen(f, func(err error) { got <- outcome{"f first", err, f.synced.Load()} })
	s.SyncThen(f, func(err error) { got <- outcome{"f second", err, f.synced.Load()} })
	s.SyncThen(failFile{boom}, func(err error) { got <- outcome{"failing", err, 0} })
	waited := make(chan error, 1)
	go func() { waited <- s.Sync(f) }()
	for s.Stats().Waits != 5 {
		runtimeGosched()
	}
	select {
	case o := <-got:
		t.Fatalf("%s reported before its round ran", o.name)
	default:
	}
	close(blocker.block)
	want := []outcome{{"f first", nil, 7}, {"f second", nil, 7}, {"failing", boom, 0}}
	for _, w := range want {
		if o := <-got; o.name != w.name || !errors.Is(o.err, w.err) || o.seen != w.seen {
			t.Fatalf("reported %+v, want %+v", o, w)
		}
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if n := f.syncs.Load(); n != 1 {
		t.Fatalf("f synced %d times for two SyncThen and one Sync of one round, want 1", n)
	}

	s.Close()
	reported := false
	s.SyncThen(failFile{boom}, func(err error) { reported = errors.Is(err, boom) })
	if !reported {
		t.Fatal("SyncThen after Close returned before reporting the sync's outcome")
	}
}
