package logstore

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// MemFS is an in-memory FS that tracks what is durable. Crash returns the
// filesystem as a machine crash would leave it: every file holds exactly the
// bytes of its last Sync, and only the directory entries present at the
// last SyncDir of their directory exist. It is for tests, but exported so
// other packages can crash a Log too. Safe for concurrent use.
type MemFS struct {
	mu      sync.Mutex
	live    map[string]*memNode // path -> node
	durable map[string]*memNode // path -> node as of the last SyncDir of its dir
	locks   map[string]bool
	// Syncs counts File.Sync calls (tests use it to check group commit).
	Syncs int
}

type memNode struct {
	data   []byte
	synced []byte
}

// NewMemFS returns an empty MemFS.
func NewMemFS() *MemFS {
	return &MemFS{live: map[string]*memNode{}, durable: map[string]*memNode{}, locks: map[string]bool{}}
}

var _ FS = (*MemFS)(nil)

// Crash returns a new MemFS holding only what was durable in fs. fs itself
// is left as it is (files still open on it keep working on the old state).
func (fs *MemFS) Crash() *MemFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := NewMemFS()
	for p, node := range fs.durable {
		n.live[p] = &memNode{data: append([]byte(nil), node.synced...), synced: append([]byte(nil), node.synced...)}
		n.durable[p] = n.live[p]
	}
	return n
}

// CrashTorn is Crash, except that a file written since its last Sync
// holds a torn write, neither its synced bytes nor its live ones: the
// live bytes with the last byte that differs from the synced bytes left
// as synced (or, if only the length differs, the live bytes one short;
// an emptied file stays empty).
func (fs *MemFS) CrashTorn() *MemFS {
	n := fs.Crash()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for p, node := range fs.durable {
		if bytes.Equal(node.data, node.synced) {
			continue
		}
		torn := append([]byte(nil), node.data...)
		i := min(len(torn), len(node.synced)) - 1
		for i >= 0 && torn[i] == node.synced[i] {
			i--
		}
		switch {
		case i >= 0:
			torn[i] = node.synced[i]
		case len(torn) > 0:
			torn = torn[:len(torn)-1]
		}
		n.live[p].data, n.live[p].synced = torn, append([]byte(nil), torn...)
	}
	return n
}

// ReadFile returns the live contents of a file (for tests).
func (fs *MemFS) ReadFile(name string) ([]byte, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	node, ok := fs.live[filepath.Clean(name)]
	if !ok {
		return nil, false
	}
	return append([]byte(nil), node.data...), true
}

// WriteFile replaces the contents of a file and marks it durable (tests use
// it to plant torn or corrupted files).
func (fs *MemFS) WriteFile(name string, data []byte) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	name = filepath.Clean(name)
	node := &memNode{data: append([]byte(nil), data...), synced: append([]byte(nil), data...)}
	fs.live[name] = node
	fs.durable[name] = node
}

func (fs *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	name = filepath.Clean(name)
	node, ok := fs.live[name]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case !ok:
		node = &memNode{}
		fs.live[name] = node
	}
	if flag&os.O_TRUNC != 0 {
		node.data = node.data[:0]
	}
	return &memFile{fs: fs, node: node, name: name}, nil
}

func (fs *MemFS) Remove(name string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	name = filepath.Clean(name)
	if _, ok := fs.live[name]; !ok {
		return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
	}
	delete(fs.live, name)
	return nil
}

func (fs *MemFS) Rename(oldname, newname string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	node, ok := fs.live[oldname]
	if !ok {
		return &os.PathError{Op: "rename", Path: oldname, Err: os.ErrNotExist}
	}
	delete(fs.live, oldname)
	fs.live[newname] = node
	return nil
}

func (fs *MemFS) Exchange(a, b string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	a, b = filepath.Clean(a), filepath.Clean(b)
	na, okA := fs.live[a]
	nb, okB := fs.live[b]
	if !okA || !okB {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: os.ErrNotExist}
	}
	fs.live[a], fs.live[b] = nb, na
	return nil
}

func (fs *MemFS) ReadDir(dir string) ([]string, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir = filepath.Clean(dir)
	names := map[string]bool{}
	for p := range fs.live {
		if filepath.Dir(p) == dir {
			names[filepath.Base(p)] = true
		}
	}
	return sortedNames(names), nil
}

func (fs *MemFS) MkdirAll(string, os.FileMode) error { return nil }

func (fs *MemFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	dir = filepath.Clean(dir)
	for p := range fs.durable {
		if filepath.Dir(p) == dir {
			if _, ok := fs.live[p]; !ok {
				delete(fs.durable, p)
			}
		}
	}
	for p, node := range fs.live {
		if filepath.Dir(p) == dir {
			fs.durable[p] = node
		}
	}
	return nil
}

type memLock struct {
	fs   *MemFS
	name string
}

func (l memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	delete(l.fs.locks, l.name)
	return nil
}

func (fs *MemFS) Lock(name string) (io.Closer, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	name = filepath.Clean(name)
	if fs.locks[name] {
		return nil, fmt.Errorf("%s: %w", name, ErrLocked)
	}
	fs.locks[name] = true
	return memLock{fs, name}, nil
}

type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	closed bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	end := off + int64(len(p))
	if end > int64(len(f.node.data)) {
		f.node.data = append(f.node.data, make([]byte, end-int64(len(f.node.data)))...)
	}
	copy(f.node.data[off:], p)
	return len(p), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.closed = true
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.node.data)), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if size < int64(len(f.node.data)) {
		f.node.data = f.node.data[:size]
	} else {
		f.node.data = append(f.node.data, make([]byte, size-int64(len(f.node.data)))...)
	}
	return nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.fs.Syncs++
	f.node.synced = append(f.node.synced[:0], f.node.data...)
	return nil
}

func (f *memFile) Preallocate(int64) error { return nil }
