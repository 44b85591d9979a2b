package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
	"sync"
)

const (
	stableFile  = "stable"
	stableSpare = "stable.spare"
	metaFile    = "meta"
)

// writeAtomic replaces dir/name with data: write name.tmp, sync, rename,
// sync the directory.
func writeAtomic(fs FS, dir, name string, data []byte) error {
	tmp := join(dir, name+".tmp")
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("logstore: write %s: %w", name, err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, join(dir, name))
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("logstore: write %s in %s: %w", name, dir, err)
	}
	return nil
}

// readChecked reads dir/name, checks magic, version and trailing CRC, and
// returns the payload after the 5-byte header. Missing file: nil, nil.
func readChecked(fs FS, dir, name, magic string) ([]byte, error) {
	b, err := readAll(fs, join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: read %s: %w", name, err)
	}
	if len(b) < 9 || string(b[:4]) != magic || b[4] != 1 ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, &CorruptionError{Segment: name, Offset: 0, Reason: "bad header or checksum"}
	}
	return b[5 : len(b)-4], nil
}

func sealChecked(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

type metaState struct {
	firstIndex uint64
	nextOffset int64
}

func readMeta(fs FS, dir string) (metaState, error) {
	b, err := readChecked(fs, dir, metaFile, "FLMT")
	if err != nil || b == nil {
		return metaState{}, err
	}
	if len(b) != 16 {
		return metaState{}, &CorruptionError{Segment: metaFile, Offset: 0, Reason: "bad length"}
	}
	return metaState{firstIndex: binary.LittleEndian.Uint64(b), nextOffset: int64(binary.LittleEndian.Uint64(b[8:]))}, nil
}

func writeMeta(fs FS, dir string, m metaState) error {
	b := append([]byte("FLMT"), 1)
	b = binary.LittleEndian.AppendUint64(b, m.firstIndex)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.nextOffset))
	return writeAtomic(fs, dir, metaFile, sealChecked(b))
}

// stableStore is raft's key/value state, rewritten atomically on each Set.
type stableStore struct {
	fs  FS
	dir string
	mu  sync.Mutex
	kv  map[string][]byte
	// spareSafe: the directory was synced since the last exchange, so
	// the spare file is not durably named stable and may be overwritten.
	spareSafe bool
}

func openStable(fs FS, dir string) (*stableStore, error) {
	s := &stableStore{fs: fs, dir: dir, kv: map[string][]byte{}}
	b, err := readChecked(fs, dir, stableFile, "FLSS")
	if err != nil || b == nil {
		return s, err
	}
	bad := &CorruptionError{Segment: stableFile, Offset: 0, Reason: "truncated entry"}
	if len(b) < 4 {
		return nil, bad
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	for range n {
		var kv [2][]byte
		for j := range kv {
			if len(b) < 4 || uint64(len(b)-4) < uint64(binary.LittleEndian.Uint32(b)) {
				return nil, bad
			}
			l := binary.LittleEndian.Uint32(b)
			kv[j], b = b[4:4+l], b[4+l:]
		}
		s.kv[string(kv[0])] = kv[1]
	}
	return s, nil
}

func (s *stableStore) set(k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.kv[k]
	s.kv[k] = append([]byte(nil), v...)
	keys := make([]string, 0, len(s.kv))
	for key := range s.kv {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	b := append([]byte("FLSS"), 1)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(keys)))
	for _, key := range keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
		b = append(b, key...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.kv[key])))
		b = append(b, s.kv[key]...)
	}
	if err := s.write(sealChecked(b)); err != nil {
		if had {
			s.kv[k] = old
		} else {
			delete(s.kv, k)
		}
		return err
	}
	return nil
}

// write makes data the content of the stable file, durably. raft sets
// its term and vote three times per election, and writeAtomic's new file
// per write made a node with thousands of replicas spend most of its
// restart creating and freeing inodes. So the file's previous content is
// kept as a spare, which write overwrites in place, syncs, and swaps
// with the stable file by FS.Exchange, then syncs the directory:
//   - both names always hold a complete, synced file, so a crash at any
//     point leaves stable with the old content or the new;
//   - the spare is overwritten only while it is known not to be durably
//     named stable (spareSafe: the directory was synced after the last
//     exchange). A process that died between an exchange and its
//     directory sync, or a failed sync, leaves that unknown, and the
//     next write syncs the directory first (Open's recovery may have:
//     Log.dirSynced).
//
// Where names cannot be exchanged, or before the stable file exists, the
// spare is renamed over the stable file instead (as writeAtomic does).
func (s *stableStore) write(data []byte) error {
	spare, stable := join(s.dir, stableSpare), join(s.dir, stableFile)
	wrap := func(err error) error { return fmt.Errorf("logstore: write %s in %s: %w", stableFile, s.dir, err) }
	if !s.spareSafe {
		if err := s.fs.SyncDir(s.dir); err != nil {
			return wrap(err)
		}
		s.spareSafe = true
	}
	f, err := s.fs.OpenFile(spare, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return wrap(err)
	}
	// No O_TRUNC: the same length (the usual case) rewrites the same
	// blocks, so a full disk does not stop raft from recording a vote.
	_, err = f.WriteAt(data, 0)
	if err == nil {
		var size int64
		if size, err = f.Size(); err == nil && size > int64(len(data)) {
			err = f.Truncate(int64(len(data)))
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wrap(err)
	}
	s.spareSafe = false
	err = s.fs.Exchange(spare, stable)
	if errors.Is(err, ErrNoExchange) || errors.Is(err, os.ErrNotExist) {
		err = s.fs.Rename(spare, stable)
	}
	if err == nil {
		err = s.fs.SyncDir(s.dir)
	}
	if err != nil {
		return wrap(err)
	}
	s.spareSafe = true
	return nil
}

// Set implements raft.StableStore; durable when it returns.
func (l *Log) Set(key, val []byte) error { return l.stable.set(string(key), val) }

// Get implements raft.StableStore. A missing key returns an empty value
// and an error whose text is exactly "not found", as raft expects.
func (l *Log) Get(key []byte) ([]byte, error) {
	l.stable.mu.Lock()
	defer l.stable.mu.Unlock()
	v, ok := l.stable.kv[string(key)]
	if !ok {
		return []byte{}, errNotFound
	}
	return append([]byte(nil), v...), nil
}

// SetUint64 implements raft.StableStore (8 bytes big-endian, as
// raft-boltdb stores it).
func (l *Log) SetUint64(key []byte, val uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore: 0 and an error "not found" for a
// missing key.
func (l *Log) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("logstore: stable key %q holds %d bytes, not a uint64", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
