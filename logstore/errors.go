package logstore

import (
	"errors"
	"fmt"
)

var (
	// ErrOffsetOutOfRange is returned by Read for an offset below
	// StartOffset or above NextOffset.
	ErrOffsetOutOfRange = errors.New("logstore: offset out of range")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("logstore: log is closed")
	// ErrLocked is returned by Open when another process (or Log) holds
	// the directory lock.
	ErrLocked = errors.New("logstore: directory is locked by another process")
	// ErrNonContiguous is returned by StoreLogs for an index gap, an index
	// that is not after the last one, or a data offset that breaks density.
	ErrNonContiguous = errors.New("logstore: entries are not contiguous")
	// ErrFrameTooLarge is returned by StoreLogs for an entry larger than
	// the frame limit (256 MiB).
	ErrFrameTooLarge = errors.New("logstore: entry too large")
	// errNotFound is the StableStore miss. hashicorp/raft compares
	// err.Error() to "not found" literally, so it is never wrapped.
	errNotFound = errors.New("not found")
)

// CorruptionError reports durable data that fails its checks: a bad frame
// in a segment other than the last, or an inconsistency between segments.
// Recovery acts on it (for example by restoring the replica from a peer).
type CorruptionError struct {
	Segment string // segment file name
	Offset  int64  // byte position in the segment file
	Reason  string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("logstore: corrupt segment %s at byte %d: %s", e.Segment, e.Offset, e.Reason)
}
