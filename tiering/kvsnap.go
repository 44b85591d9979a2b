package tiering

import (
	"cmp"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
)

// KV snapshots in remote storage (DESIGN §9): a primary-key bucket's
// leader uploads a raft snapshot of its replica (the log state and the KV
// state at one raft index) next to the bucket's remote log segments, as
// kv-<raft index>-<next data offset>.snap, keeping the newest few. With the
// remote log after it, it is what a bucket that lost every replica is
// restored from (node/restore.go).

// KVSnapshot names one KV snapshot of a bucket in remote storage.
type KVSnapshot struct {
	Name       string // the object's name in the store
	Index      uint64 // the raft index of the lost group it was taken at
	NextOffset int64  // the data offset after the last record it holds
}

// KeepKVSnapshots is how many KV snapshots a bucket keeps in remote
// storage: the newest, and one before it for a restore that finds the
// newest not yet covered by the remote log.
const KeepKVSnapshots = 2

func kvSnapshotName(dir string, index uint64, next int64) string {
	return fmt.Sprintf("%s/kv-%020d-%020d.snap", dir, index, next)
}

// parseKVSnapshotName reads a base name made by kvSnapshotName (canonical
// form only).
func parseKVSnapshotName(base string) (KVSnapshot, bool) {
	a, b, ok := nameFields(base, "kv-", ".snap")
	if !ok {
		return KVSnapshot{}, false
	}
	index, err1 := strconv.ParseUint(a, 10, 64)
	next, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || index == 0 || next < 0 || kvSnapshotName("", index, next) != "/"+base {
		return KVSnapshot{}, false
	}
	return KVSnapshot{Name: base, Index: index, NextOffset: next}, true
}

// nameFields splits an object's base name <prefix><a>-<b><suffix> into
// a and b.
func nameFields(base, prefix, suffix string) (a, b string, ok bool) {
	stem, ok := strings.CutSuffix(base, suffix)
	if !ok {
		return "", "", false
	}
	if stem, ok = strings.CutPrefix(stem, prefix); !ok {
		return "", "", false
	}
	return strings.Cut(stem, "-")
}

// KVSnapshots lists the bucket's KV snapshots, oldest first.
func (l *RemoteLog) KVSnapshots() ([]KVSnapshot, error) {
	names, err := l.store.List(l.dir)
	if err != nil {
		return nil, err
	}
	var out []KVSnapshot
	for _, n := range names {
		if s, ok := parseKVSnapshotName(path.Base(n)); ok {
			s.Name = n
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b KVSnapshot) int { return cmp.Compare(a.Index, b.Index) })
	return out, nil
}

// PutKVSnapshot stores the size bytes of r as the bucket's KV snapshot at
// raft index index, whose records end at next, and deletes all but the
// newest KeepKVSnapshots.
func (l *RemoteLog) PutKVSnapshot(index uint64, next int64, r io.Reader, size int64) error {
	if err := l.store.Put(kvSnapshotName(l.dir, index, next), r, size); err != nil {
		return err
	}
	snaps, err := l.KVSnapshots()
	if err != nil {
		return err
	}
	for len(snaps) > KeepKVSnapshots {
		if err := l.store.Delete(snaps[0].Name); err != nil {
			return err
		}
		snaps = snaps[1:]
	}
	return nil
}

// DeleteKVSnapshots deletes every KV snapshot of the bucket (its table or
// partition was dropped).
func (l *RemoteLog) DeleteKVSnapshots() error {
	snaps, err := l.KVSnapshots()
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if err := l.store.Delete(s.Name); err != nil {
			return err
		}
	}
	return nil
}

// OpenKVSnapshot opens a KV snapshot for reading.
func (l *RemoteLog) OpenKVSnapshot(s KVSnapshot) (io.ReadCloser, error) {
	o, err := l.store.Open(s.Name)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(o, 0, o.Size()), o}, nil
}

// RestorePoint returns the newest KV snapshot from which the remote log
// holds every record up to end, with no gap (its own next offset may be end
// itself), or, when there is none but the remote log holds every record
// from offset 0 to end, the zero KVSnapshot (Name ""): the empty state
// before the first record. ok is false when neither is there.
func (l *RemoteLog) RestorePoint(end int64) (KVSnapshot, bool, error) {
	snaps, err := l.KVSnapshots()
	if err != nil {
		return KVSnapshot{}, false, err
	}
	for i := len(snaps) - 1; i >= 0; i-- {
		s := snaps[i]
		if s.NextOffset == end || (s.NextOffset < end && l.HeldFrom(s.NextOffset) >= end) {
			return s, true, nil
		}
	}
	return KVSnapshot{}, end == 0 || l.HeldFrom(0) >= end, nil
}
