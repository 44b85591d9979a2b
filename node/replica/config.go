package replica

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// RaftTuning holds the raft settings of a bucket group. A node runs
// hundreds to thousands of groups, so the defaults trade failover speed for
// idle CPU (DESIGN §5: idle cost is driven by CommitTimeout, heartbeats every
// HeartbeatTimeout/10 and lease checks; apply throughput does not depend on
// CommitTimeout). Zero fields take the defaults.
type RaftTuning struct {
	// HeartbeatTimeout: a follower without contact for this long starts an
	// election. Default 1.5 s (raft's 1 s doubled-ish: heartbeats go out every
	// 150 ms per follower, per group).
	HeartbeatTimeout time.Duration
	// ElectionTimeout: a candidate without a result for this long retries.
	// Default 1.5 s.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout: a leader without quorum contact for this long
	// steps down. Default HeartbeatTimeout, the most raft allows: the
	// heartbeat pump refreshes the contact every 2/5 of HeartbeatTimeout, so
	// a lease shorter than that interval (as a fixed 1 s was with a 3 s
	// HeartbeatTimeout) makes every leader step down between two pumps.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout: idle interval of the replication loop (the
	// AppendEntries that carries the commit index when no new entry does).
	// Default 2 s: measured with no apply-throughput cost, a quarter of the
	// idle CPU of raft's 50 ms.
	CommitTimeout time.Duration
	// MaxAppendEntries: entries per AppendEntries RPC and per apply batch.
	// Default 256 (our entries are already group-committed). The peer
	// transport sends a request that would not fit in one frame as
	// consecutive parts that do (rpc/peer splitAppend).
	MaxAppendEntries int
	// SnapshotInterval: how often raft checks whether to snapshot. Default
	// 2 min (jittered by raft; the check is cheap).
	SnapshotInterval time.Duration
	// SnapshotThreshold: entries since the last snapshot before one is taken.
	// Default 2048: snapshots are tiny (no data), and this bounds the entries a
	// restart replays through the FSM.
	SnapshotThreshold uint64
	// MaxEntryBytes: largest raft entry the proposer builds; more queued
	// requests go into further entries; one request larger than this is
	// rejected with ErrTooLarge. Default 8 MiB; a node sets it to
	// limits.max_batch_bytes, so that every batch the API accepts fits in
	// one entry, and its peer frames to hold such an entry.
	MaxEntryBytes int
	// MaxQueuedRequests / MaxQueuedBytes: Append beyond these returns
	// ErrBusy. Defaults 8192 requests, 64 MiB.
	MaxQueuedRequests int
	MaxQueuedBytes    int
	// MaxInflightEntries: raft entries proposed and not yet committed before
	// the proposer waits. Default 64.
	MaxInflightEntries int
	// SerialLeaderSync makes a leader of several voters sync its entries
	// before it sends them to its followers, as hashicorp/raft does by
	// itself, instead of in parallel with theirs (durable.go). Default off.
	SerialLeaderSync bool
}

// withDefaults returns t with zero fields set to their defaults.
func (t RaftTuning) withDefaults() RaftTuning {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.HeartbeatTimeout, 1500*time.Millisecond)
	def(&t.ElectionTimeout, 1500*time.Millisecond)
	def(&t.LeaderLeaseTimeout, t.HeartbeatTimeout)
	def(&t.CommitTimeout, 2*time.Second)
	def(&t.SnapshotInterval, 2*time.Minute)
	if t.MaxAppendEntries <= 0 {
		t.MaxAppendEntries = 256
	}
	if t.SnapshotThreshold == 0 {
		t.SnapshotThreshold = 2048
	}
	if t.MaxEntryBytes <= 0 {
		t.MaxEntryBytes = 8 << 20
	}
	if t.MaxQueuedRequests <= 0 {
		t.MaxQueuedRequests = 8192
	}
	if t.MaxQueuedBytes <= 0 {
		t.MaxQueuedBytes = 64 << 20
	}
	if t.MaxInflightEntries <= 0 {
		t.MaxInflightEntries = 64
	}
	return t
}

// onPump returns t with raft's heartbeat, election and lease timeouts
// raised BackstopScale times, as a replica on a HeartbeatPump runs: the pump
// heartbeats and detects failures, raft's timers are the backstop.
func (t RaftTuning) onPump() RaftTuning {
	t.HeartbeatTimeout *= BackstopScale
	t.ElectionTimeout *= BackstopScale
	t.LeaderLeaseTimeout *= BackstopScale
	return t
}

// raftConfig builds the raft.Config of a group.
func (t RaftTuning) raftConfig(id raft.ServerID, logger hclog.Logger) (*raft.Config, error) {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = t.HeartbeatTimeout
	c.ElectionTimeout = t.ElectionTimeout
	c.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	c.CommitTimeout = t.CommitTimeout
	c.MaxAppendEntries = t.MaxAppendEntries
	// BatchApplyCh stays off: with it raft buffers applies in a channel that
	// Shutdown never drains, so their futures would never resolve and Close
	// would wait forever. The proposer already packs every queued request
	// into one entry, so the buffer would gain little.
	c.BatchApplyCh = false
	c.SnapshotInterval = t.SnapshotInterval
	c.SnapshotThreshold = t.SnapshotThreshold
	// The raft log IS the data log: raft must never compact it. compactLogs
	// truncates up to min(snapshot, last-TrailingLogs) and returns early when
	// last <= TrailingLogs, so MaxUint64 disables it. Retention deletes
	// segments itself, never beyond the last snapshot index.
	c.TrailingLogs = math.MaxUint64
	// Restore the (tiny) snapshot on start, then replay the log after it.
	c.NoSnapshotRestoreOnStart = false
	// raft's go-metrics go nowhere (no sink is installed); skip at least
	// the duplicate legacy ones on every heartbeat and append.
	c.NoLegacyTelemetry = true
	c.Logger = logger
	if err := raft.ValidateConfig(c); err != nil {
		return nil, fmt.Errorf("replica raft config: %w", err)
	}
	return c, nil
}

// newHCLogger returns an hclog.Logger that forwards warnings and errors to
// slog (raft's info/debug chatter is dropped before formatting).
func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.Warn,
		Output:      &slogWriter{l: l},
		JSONFormat:  true,
		DisableTime: true,
	})
}

// slogWriter receives one JSON object per hclog line.
type slogWriter struct{ l *slog.Logger }

func (w *slogWriter) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		w.l.Warn(string(p))
		return len(p), nil
	}
	lvl := slog.LevelWarn
	if s, _ := m["@level"].(string); s == "error" {
		lvl = slog.LevelError
	}
	msg, _ := m["@message"].(string)
	attrs := make([]any, 0, 2*len(m))
	for k, v := range m {
		if k == "@level" || k == "@message" {
			continue
		}
		attrs = append(attrs, k, v)
	}
	w.l.Log(context.Background(), lvl, msg, attrs...)
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)
