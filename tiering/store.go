// Package tiering moves closed log segments to remote storage and reads
// them back: the remote log of each bucket (DESIGN.md §9). A bucket's
// leader uploads its closed, committed segments; every replica then drops
// its local copies of what the remote log holds (keeping the newest few),
// and a read below the local log start is served from the remote log.
//
// Remote storage is a Store: a directory here (local disk, or a mount that
// all nodes share, such as NFS). Each bucket's segments are objects named
// by the offsets they hold, so listing a bucket's prefix is its manifest:
// there is no second record to keep in step with the objects.
package tiering

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Object is an opened remote object.
type Object interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// Store is remote storage of immutable, named objects. Names are
// slash-separated relative paths ("t7/p0/b3/seg.log").
type Store interface {
	// Put stores the size bytes of r as name, durably and atomically: a
	// reader sees the whole object or none. An existing object is replaced.
	Put(name string, r io.Reader, size int64) error
	// Open opens name; a missing object is an error wrapping
	// os.ErrNotExist.
	Open(name string) (Object, error)
	// List returns the names of the objects directly under dir, sorted.
	// A missing dir has none.
	List(dir string) ([]string, error)
	// Delete removes name; a missing object is not an error.
	Delete(name string) error
}

// DirStore is a Store in a directory of the local filesystem.
type DirStore struct{ root string }

// NewDirStore returns a DirStore rooted at root, creating it if needed.
func NewDirStore(root string) (*DirStore, error) {
	if root == "" {
		return nil, errors.New("tiering: remote directory not set")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("tiering: remote directory: %w", err)
	}
	return &DirStore{root: root}, nil
}

var _ Store = (*DirStore)(nil)

// checkName refuses object names that are not clean relative paths (they
// could leave a DirStore's root, or name one S3 object two ways).
func checkName(name string) error {
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("tiering: bad object name %q", name)
	}
	return nil
}

// path maps an object name to a file path.
func (d *DirStore) path(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	return filepath.Join(d.root, filepath.FromSlash(name)), nil
}

// tmpSuffix marks a Put in progress; List skips such files.
const tmpSuffix = ".tmp"

func (d *DirStore) Put(name string, r io.Reader, _ int64) (err error) {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tiering: put %s: %w", name, err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(p)+".*"+tmpSuffix)
	if err != nil {
		return fmt.Errorf("tiering: put %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return fmt.Errorf("tiering: put %s: %w", name, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("tiering: put %s: %w", name, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("tiering: put %s: %w", name, err)
	}
	if err = os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("tiering: put %s: %w", name, err)
	}
	return syncDir(dir)
}

type dirObject struct {
	*os.File
	size int64
}

func (o dirObject) Size() int64 { return o.size }

func (d *DirStore) Open(name string) (Object, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("tiering: open %s: %w", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tiering: open %s: %w", name, err)
	}
	return dirObject{File: f, size: st.Size()}, nil
}

func (d *DirStore) List(dir string) ([]string, error) {
	p, err := d.path(dir)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tiering: list %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), tmpSuffix) {
			out = append(out, dir+"/"+e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

func (d *DirStore) Delete(name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("tiering: delete %s: %w", name, err)
	}
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("tiering: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("tiering: sync %s: %w", dir, err)
	}
	return nil
}
