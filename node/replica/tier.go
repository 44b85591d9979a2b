package replica

import (
	"fmt"

	"github.com/fluss-node/fluss-node/tiering"
)

// SetRemoteLog gives the replica its bucket's remote log: from then on a
// read below the local log start is served from it, and LogStartOffset
// and OffsetForTimestamp include it.
func (r *Replica) SetRemoteLog(rl *tiering.RemoteLog) { r.remote.Store(rl) }

// Generation is the generation of the bucket's group this replica belongs
// to (Config.Generation).
func (r *Replica) Generation() int64 { return r.cfg.Generation }

// RemoteLog is the replica's remote log, nil while tiering is off.
func (r *Replica) RemoteLog() *tiering.RemoteLog { return r.remote.Load() }

// TierStats is what one Tier call did.
type TierStats struct {
	Uploaded int // closed segments copied to the remote log
	Dropped  int // local segments deleted because the remote log holds them
}

// Tier moves the bucket's cold data to its remote log (SetRemoteLog).
// First it copies every closed segment whose entries are all applied —
// committed, so no leader will ever truncate them — and whose records the
// remote log does not hold yet. Every replica does this, not only the
// leader: a replica that caught up from a raft snapshot lacks the entries
// before it, and if it leads later, the remote log must already hold them
// (uploaded by the replicas that have them); a segment the remote log
// holds is never uploaded again. Then it deletes the local segments the
// remote log holds, keeping the newest keep closed segments, never beyond
// the last raft snapshot (see trimHead).
func (r *Replica) Tier(keep int) (TierStats, error) {
	var st TierStats
	rl := r.remote.Load()
	if rl == nil {
		return st, nil
	}
	if r.isClosed() {
		return st, ErrClosed
	}
	applied := r.raft.AppliedIndex()
	for _, c := range r.log.ClosedSegments() {
		if c.Last > applied {
			break
		}
		up, err := rl.Upload(c)
		if err != nil {
			return st, fmt.Errorf("%v tiering: %w", r.cfg.ID, err)
		}
		if up {
			st.Uploaded++
		}
	}
	// The local segments that may go: those below the end of the remote
	// records that run without a gap from the local log start.
	upTo := rl.HeldFrom(r.log.StartOffset())
	n, err := r.trimHead(r.log.Covered(upTo, keep), func(maxIndex uint64) (int, error) {
		return r.log.DeleteCovered(upTo, keep, maxIndex)
	})
	if err != nil {
		return st, fmt.Errorf("%v tiering: %w", r.cfg.ID, err)
	}
	st.Dropped = n
	return st, nil
}
