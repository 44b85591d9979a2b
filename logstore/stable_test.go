package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// stepFS is a MemFS that counts the operations that change files or
// names; before operation crashAt it takes the image a machine crash
// would leave then (torn: with a torn write in each unsynced file).
// failSyncDir makes the next SyncDir fail after doing nothing, as a
// process that dies before its directory sync.
type stepFS struct {
	*MemFS
	ops, crashAt int
	torn         bool
	failSyncDir  bool
	image        *MemFS
	// allowed is what the stable key may hold after a crash now: the
	// values of the Sets since the last one that returned, and that one.
	allowed, imageAllowed []string
}

func (s *stepFS) step() {
	s.ops++
	if s.ops != s.crashAt {
		return
	}
	if s.torn {
		s.image = s.CrashTorn()
	} else {
		s.image = s.Crash()
	}
	s.imageAllowed = slices.Clone(s.allowed)
}

func (s *stepFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	s.step()
	f, err := s.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return stepFile{f, s}, nil
}

func (s *stepFS) Remove(name string) error { s.step(); return s.MemFS.Remove(name) }
func (s *stepFS) Rename(a, b string) error { s.step(); return s.MemFS.Rename(a, b) }
func (s *stepFS) Exchange(a, b string) error {
	s.step()
	return s.MemFS.Exchange(a, b)
}

func (s *stepFS) SyncDir(dir string) error {
	s.step()
	if s.failSyncDir {
		s.failSyncDir = false
		return errors.New("injected: process died before the directory sync")
	}
	return s.MemFS.SyncDir(dir)
}

type stepFile struct {
	File
	fs *stepFS
}

func (f stepFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.step()
	return f.File.WriteAt(p, off)
}
func (f stepFile) Truncate(size int64) error { f.fs.step(); return f.File.Truncate(size) }
func (f stepFile) Sync() error               { f.fs.step(); return f.File.Sync() }

// TestStableCrashAtEveryStep crashes, plainly and with torn writes, before
// every file operation of a series of Sets (growing, shrinking, one whose
// process dies between the exchange of names and the directory sync,
// then a restart on the files as that process left them): the stable
// store always opens, and holds the value of the last Set that returned
// or of one begun after it.
func TestStableCrashAtEveryStep(t *testing.T) {
	// With entries, Open's recovery syncs the directory, which stands in
	// for the first Set's directory sync.
	run := func(fs *stepFS, entries bool) {
		t.Helper()
		fs.allowed = []string{""}
		opts := Options{Dir: "/d", OffsetFunc: testOffsets, FS: fs}
		l, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		if entries {
			mustStore(t, l, (&gen{}).batch(3, 10))
		}
		set := func(v string, wantErr bool) {
			fs.allowed = append(fs.allowed, v)
			err := l.Set([]byte("term"), []byte(v))
			if (err != nil) != wantErr {
				t.Fatalf("Set(%q) = %v, want error %v", v, err, wantErr)
			}
			if err == nil {
				fs.allowed = []string{v}
			}
		}
		set("1", false)
		if err := l.Set([]byte("vote"), []byte("node-1")); err != nil {
			t.Fatal(err)
		}
		set("22", false)
		set("3", false)
		fs.failSyncDir = true
		set("4444", true)
		l.Close()
		// The next process opens the names as the last one left them.
		if l, err = Open(opts); err != nil {
			t.Fatal(err)
		}
		if v, err := l.Get([]byte("term")); err != nil || string(v) != "4444" {
			t.Fatalf("after the restart term = %q, %v, want the exchanged 4444", v, err)
		}
		set("5", false)
		set("66", false)
		l.Close()
	}
	for _, entries := range []bool{false, true} {
		count := &stepFS{MemFS: NewMemFS()}
		run(count, entries)
		if count.ops < 30 {
			t.Fatalf("only %d operations counted", count.ops)
		}
		for _, torn := range []bool{false, true} {
			for at := 1; at <= count.ops; at++ {
				t.Run(fmt.Sprintf("entries=%v/torn=%v/op%d", entries, torn, at), func(t *testing.T) {
					fs := &stepFS{MemFS: NewMemFS(), crashAt: at, torn: torn}
					run(fs, entries)
					l, err := Open(Options{Dir: "/d", OffsetFunc: testOffsets, FS: fs.image})
					if err != nil {
						t.Fatalf("Open after the crash: %v", err)
					}
					defer l.Close()
					v, err := l.Get([]byte("term"))
					if err != nil && err.Error() != "not found" {
						t.Fatal(err)
					}
					if !slices.Contains(fs.imageAllowed, string(v)) {
						t.Fatalf("term = %q after the crash, want one of %q", v, fs.imageAllowed)
					}
				})
			}
		}
	}
}

// TestStableReusesItsFiles checks on the real filesystem that Sets swap
// two files (no new inode per write, which made elections on a node with
// thousands of replicas cost most of a restart) and that what was set is
// read back after a reopen.
func TestStableReusesItsFiles(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, OffsetFunc: testOffsets})
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint64]bool{}
	for i := range 6 {
		if err := l.SetUint64([]byte("term"), uint64(i)); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(dir, stableFile))
		if err != nil {
			t.Fatal(err)
		}
		inodes[st.Sys().(*syscall.Stat_t).Ino] = true
	}
	l.Close()
	if err := (OSFS{}).Exchange(filepath.Join(dir, stableFile), filepath.Join(dir, stableSpare)); errors.Is(err, ErrNoExchange) {
		t.Skipf("this filesystem cannot exchange names (%v): the stable store renames, with a new file per Set", err)
	} else if err != nil {
		t.Fatal(err)
	}
	// Swap back what the probe swapped.
	if err := (OSFS{}).Exchange(filepath.Join(dir, stableFile), filepath.Join(dir, stableSpare)); err != nil {
		t.Fatal(err)
	}
	if len(inodes) != 2 {
		t.Fatalf("6 Sets used %d files, want 2", len(inodes))
	}
	if l, err = Open(Options{Dir: dir, OffsetFunc: testOffsets}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if v, err := l.GetUint64([]byte("term")); err != nil || v != 5 {
		t.Fatalf("term after reopen = %d, %v, want 5", v, err)
	}
}

// FuzzOpenStable opens a stable file whose header and checksum are valid
// around an arbitrary payload (without them every input would stop at the
// checksum): openStable either refuses it as corrupt or reads a store
// that, written back by a Set, reads the same after a reopen.
func FuzzOpenStable(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 'k', 2, 0, 0, 0, 'v', 'w'})
	f.Add([]byte{2, 0, 0, 0, 1, 0, 0, 0, 'k', 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, payload []byte) {
		fs := NewMemFS()
		fs.WriteFile(join("d", stableFile), sealChecked(append([]byte("FLSS\x01"), payload...)))
		s, err := openStable(fs, "d")
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("not a corruption error: %v", err)
			}
			return
		}
		want := maps.Clone(s.kv)
		want["fuzz"] = []byte("x")
		if err := s.set("fuzz", []byte("x")); err != nil {
			t.Fatal(err)
		}
		again, err := openStable(fs, "d")
		if err != nil {
			t.Fatalf("reopen after a Set: %v", err)
		}
		if !maps.EqualFunc(again.kv, want, bytes.Equal) {
			t.Fatalf("reopened %q, want %q", again.kv, want)
		}
	})
}
