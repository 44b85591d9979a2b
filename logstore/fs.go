package logstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// FS is the small filesystem surface the log uses. It exists so tests can
// simulate a crash that drops everything not yet synced (see MemFS).
type FS interface {
	// OpenFile opens or creates name (os.O_* flags).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldname, newname string) error
	// Exchange atomically swaps the names a and b, which both exist
	// (renameat2 RENAME_EXCHANGE). An error wrapping ErrNoExchange where
	// the filesystem cannot; one wrapping os.ErrNotExist if a name is
	// missing.
	Exchange(a, b string) error
	// ReadDir returns the base names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes creations, renames and removals in dir durable.
	SyncDir(dir string) error
	// Lock takes an exclusive, non-blocking lock on name (created if
	// missing); Close releases it.
	Lock(name string) (io.Closer, error)
}

// File is an open file. The log only appends (WriteAt at the end),
// truncates and reads with ReadAt, so no file position is shared.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Name() string
	Size() (int64, error)
	Truncate(size int64) error
	// Sync makes the file's data durable (fdatasync on Linux).
	Sync() error
	// Preallocate reserves size bytes without changing the file size;
	// a no-op where unsupported.
	Preallocate(size int64) error
}

// OSFS is the real filesystem.
type OSFS struct{}

var _ FS = OSFS{}

// osFile is an open file of OSFS. dev is the device of its filesystem,
// read once at open: the Syncer groups a round's files by it for syncfs(2),
// and a file never changes filesystems.
type osFile struct {
	*os.File
	dev uint64
}

func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	return osFile{File: f, dev: st.Dev}, nil
}

func (OSFS) Remove(name string) error             { return os.Remove(name) }
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// ErrNoExchange is returned by FS.Exchange where names cannot be swapped.
var ErrNoExchange = errors.New("exchange of names not supported")

func (OSFS) Exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		return nil
	case err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP:
		return fmt.Errorf("exchange %s and %s: %w (%w)", a, b, ErrNoExchange, err)
	}
	return &os.LinkError{Op: "exchange", Old: a, New: b, Err: err}
}
func (OSFS) MkdirAll(dir string, perm os.FileMode) error {
	return os.MkdirAll(dir, perm)
}

func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osLock struct{ f *os.File }

func (l osLock) Close() error {
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}

func (OSFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", name, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return osLock{f}, nil
}

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (f osFile) Sync() error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

func (f osFile) Preallocate(size int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, size)
	if err == unix.EOPNOTSUPP || err == unix.ENOSYS {
		return nil
	}
	return err
}

// Fd and Dev let the Syncer cover the file with one syncfs(2) per
// filesystem.
func (f osFile) Fd() uintptr { return f.File.Fd() }
func (f osFile) Dev() uint64 { return f.dev }

// sortedNames is a helper for FS implementations.
func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func join(dir, name string) string { return filepath.Join(dir, name) }
