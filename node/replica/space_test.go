package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// While SpaceCheck refuses, new writes are answered with ErrNoSpace and
// store nothing; retries of stored writes get their first answer; once it
// passes again, a refused sequence may be sent again.
func TestSpaceCheckRefusesNewWrites(t *testing.T) {
	var full atomic.Bool
	checks := atomic.Int64{}
	r := openSingle(t, t.TempDir(), func(c *Config) {
		c.SpaceCheck = func() error {
			checks.Add(1)
			if full.Load() {
				return fmt.Errorf("%w: test disk nearly full", ErrNoSpace)
			}
			return nil
		}
	})
	defer r.Close()
	ctx := context.Background()
	app := func(w int64, s int32) (int64, int32, error) {
		return r.Append(ctx, [][]byte{makeBatch(3, fmt.Sprintf("w%d s%d", w, s))}, w, s)
	}
	for s := int32(0); s < 2; s++ {
		if _, _, err := app(7, s); err != nil {
			t.Fatalf("seq %d: %v", s, err)
		}
	}
	if checks.Load() == 0 {
		t.Fatal("SpaceCheck was never asked")
	}
	before := fetchAll(t, r)

	full.Store(true)
	for _, w := range []int64{7, 0, 9} { // the same writer's next, no writer, a new writer
		if _, _, err := app(w, 2); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("writer %d while full: err %s, want ErrNoSpace", w, errString(err))
		}
	}
	if base, count, err := app(7, 1); err != nil || base != 3 || count != 3 {
		t.Fatalf("retry of a stored write while full: (%d, %d, %v), want (3, 3, nil)", base, count, err)
	}
	sameBatches(t, before, []*Replica{r})

	full.Store(false)
	if base, _, err := app(7, 2); err != nil || base != 6 {
		t.Fatalf("refused sequence sent again: base %d err %v, want 6", base, err)
	}
	if base, _, err := app(9, 2); err != nil || base != 9 {
		t.Fatalf("new writer after the refusal: base %d err %v, want 9", base, err)
	}
}

// enospcFS fails every write with errno (default ENOSPC) while full is
// set, as a full filesystem does (possibly after writing part of it).
type enospcFS struct {
	logstore.FS
	full  atomic.Bool
	errno syscall.Errno
}

func (fs *enospcFS) OpenFile(name string, flag int, perm os.FileMode) (logstore.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &enospcFile{File: f, fs: fs}, nil
}

type enospcFile struct {
	logstore.File
	fs *enospcFS
}

func (f *enospcFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.fs.full.Load() {
		return f.File.WriteAt(p, off)
	}
	n, _ := f.File.WriteAt(p[:len(p)/2], off) // a torn write
	errno := f.fs.errno
	if errno == 0 {
		errno = syscall.ENOSPC
	}
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: errno}
}

// A write whose entry the log cannot store for lack of space is answered
// with ErrNoSpace (not as a lost leadership), the log keeps what it had,
// and writes go on once space is back.
func TestFullDiskAnswersNoSpace(t *testing.T) {
	fs := &enospcFS{FS: logstore.OSFS{}}
	dir := t.TempDir()
	r := openSingle(t, dir, func(c *Config) { c.Log.FS = fs })
	ctx := context.Background()
	app := func(s int32) (int64, int32, error) {
		return r.Append(ctx, [][]byte{makeBatch(2, fmt.Sprintf("s%d", s))}, 3, s)
	}
	for s := int32(0); s < 3; s++ {
		if _, _, err := app(s); err != nil {
			t.Fatalf("seq %d: %v", s, err)
		}
	}
	before := fetchAll(t, r)

	fs.full.Store(true)
	_, _, err := app(3)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: err %s, want ErrNoSpace wrapping ENOSPC", errString(err))
	}

	fs.full.Store(false)
	// The group stepped down when it could not store the entry; it elects
	// itself again, and the same sequence goes through.
	waitFor(t, 10*time.Second, func() error {
		_, _, err := app(3)
		return err
	})
	after := fetchAll(t, r)
	if len(after) != len(before)+1 {
		t.Fatalf("%d batches after the full disk, want %d", len(after), len(before)+1)
	}
	for i, b := range before {
		if string(b) != string(after[i]) {
			t.Fatalf("batch %d changed across the full disk", i)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openSingle(t, dir, nil)
	defer r.Close()
	sameBatches(t, after, []*Replica{r})
}

// A follower's refusal of new data says which bucket and why.
func TestAdmitWrites(t *testing.T) {
	var full atomic.Bool
	admit := admitWrites(raftmeta.BucketID{TableID: 3, Bucket: 1}, func() error {
		if full.Load() {
			return fmt.Errorf("%w: test", ErrNoSpace)
		}
		return nil
	})
	if err := admit(); err != nil {
		t.Fatalf("space left: %v", err)
	}
	full.Store(true)
	if err := admit(); !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "table 3 bucket 1") {
		t.Fatalf("while full: %v, want ErrNoSpace naming the bucket", err)
	}
}

// Any other error of the disk reaches the writer too, as a lost leadership
// (unavailable: clients retry) that names it.
func TestDiskErrorIsNamed(t *testing.T) {
	fs := &enospcFS{FS: logstore.OSFS{}, errno: syscall.EIO}
	r := openSingle(t, t.TempDir(), func(c *Config) { c.Log.FS = fs })
	defer r.Close()
	ctx := context.Background()
	if _, _, err := r.Append(ctx, [][]byte{makeBatch(2, "a")}, 3, 0); err != nil {
		t.Fatal(err)
	}
	fs.full.Store(true)
	_, _, err := r.Append(ctx, [][]byte{makeBatch(2, "b")}, 3, 1)
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, syscall.EIO) || errors.Is(err, ErrNoSpace) {
		t.Fatalf("append on a failing disk: err %s, want ErrNotLeader wrapping EIO", errString(err))
	}
	fs.full.Store(false)
	waitFor(t, 10*time.Second, func() error {
		_, _, err := r.Append(ctx, [][]byte{makeBatch(2, "b")}, 3, 1)
		return err
	})
}
