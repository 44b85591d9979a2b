package replica

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
)

// dataLog is what a replica needs from its log: raft's log and stable
// stores plus the data-offset read path. *logstore.Log implements it.
type dataLog interface {
	raft.LogStore
	raft.StableStore
	// NextOffset is the data offset after the last stored entry.
	NextOffset() int64
	// StartOffset is the first data offset still stored.
	StartOffset() int64
	// Read visits stored entries overlapping [offset, endOffset) in order;
	// data (the raft entry Data) must not be retained after fn returns.
	Read(offset, endOffset int64, maxBytes int, fn func(index uint64, base int64, count int32, data []byte) bool) error
	OffsetForTimestamp(tsMs int64) (int64, bool)
	DeleteBefore(cutoffMs int64, maxIndex uint64) (int, error)
	// Expired is the last raft index of the newest closed segment older
	// than cutoffMs, 0 if none.
	Expired(cutoffMs int64) uint64
	// ClosedSegments, Covered and DeleteCovered: tiering (tier.go).
	ClosedSegments() []logstore.ClosedSegment
	Covered(upTo int64, keep int) uint64
	DeleteCovered(upTo int64, keep int, maxIndex uint64) (int, error)
	// Reset empties the log; a next entry without records starts at
	// nextOffset (snapshot.go).
	Reset(nextOffset int64) error
	// Size is the bytes of the stored segments.
	Size() int64
	// SetDeferSync, SetDeferWhen, WaitDurable, PendingSync and
	// WaitSynced: deferred syncs (durable.go).
	SetDeferSync(on bool) error
	SetDeferWhen(when func(logs []*raft.Log) bool)
	WaitDurable(index uint64) error
	PendingSync() uint64
	WaitSynced(index uint64) error
	Close() error
}

var _ dataLog = (*logstore.Log)(nil)

// raftLog is the log as raft sees it: without logstore's IsMonotonic, so
// that raft does not empty the log after it installs a snapshot; the
// FSM's Restore has made the log agree with the snapshot by then
// (Replica.restoreLog), and raft's own compaction is off (TrailingLogs).
type raftLog struct{ dataLog }

// openLog opens the bucket's logstore in dir with the replica's OffsetFunc.
func openLog(dir string, opts logstore.Options, syncer *logstore.Syncer, logger *slog.Logger) (dataLog, error) {
	opts.Dir = dir
	opts.OffsetFunc = EntryOffsets
	if syncer != nil {
		opts.Syncer = syncer
	}
	if opts.Logger == nil {
		opts.Logger = logger
	}
	return logstore.Open(opts)
}

// mapLogErr maps logstore sentinels to the replica's.
func mapLogErr(err error) error {
	if errors.Is(err, logstore.ErrOffsetOutOfRange) {
		return fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
	}
	if errors.Is(err, logstore.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}
