package replica

import (
	"fmt"
	"sync/atomic"
)

// WriteBudget bounds the bytes of writes a node holds at once over all its
// bucket replicas, from the moment a leader queues a write until it answers
// it (queued, proposed, replicated, applied) or its caller stops waiting.
// Each replica's queue has its own bound (MaxQueuedBytes); with many
// buckets those add up past what the machine has, so the node shares one
// budget among them. A write that does not fit is refused with ErrBusy
// (resource_exhausted), as a full queue is. A nil budget bounds nothing.
type WriteBudget struct {
	limit int64
	used  atomic.Int64
}

// NewWriteBudget returns a budget of limit bytes.
func NewWriteBudget(limit int64) *WriteBudget { return &WriteBudget{limit: limit} }

// Used is the bytes held now.
func (b *WriteBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// take reserves n bytes or says why it cannot. A write is taken whatever
// its size when nothing is held, so that every write the limits admit can
// go through alone.
func (b *WriteBudget) take(n int64) error {
	if b == nil {
		return nil
	}
	for {
		used := b.used.Load()
		if used > 0 && used+n > b.limit {
			return fmt.Errorf("%w: the node holds %d bytes of writes not yet answered, and this one (%d bytes) would pass limits.max_pending_write_bytes (%d); retry later", ErrBusy, used, n, b.limit)
		}
		if b.used.CompareAndSwap(used, used+n) {
			return nil
		}
	}
}

// give returns n bytes taken before.
func (b *WriteBudget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}
