package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/logstore"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/tiering"
)

// Sentinel errors. Every error a Replica returns wraps one of these (or is a
// context error).
var (
	// ErrNotLeader: this replica does not lead its group; see NotLeaderError
	// for the leader. For an Append that was queued or in flight the outcome
	// is unknown: retry with the same writer id and sequence.
	ErrNotLeader = errors.New("not the bucket leader")
	// ErrNoLeader: the group has no leader yet, or this replica was just
	// elected and waits for its barrier. Retry.
	ErrNoLeader = errors.New("bucket has no leader")
	// ErrOffsetOutOfRange: a fetch offset below the log start or beyond the
	// end of the log.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrClosed: the replica is closed.
	ErrClosed = errors.New("bucket replica closed")
	// ErrOutOfOrderSequence: a writer's sequence older than the newest kept
	// and not among the kept ones (WriterWindow).
	ErrOutOfOrderSequence = errors.New("out of order batch sequence")
	// ErrBusy: the proposal queue is full. Retry later (resource_exhausted).
	ErrBusy = errors.New("bucket replica busy")
	// ErrTooLarge: one Append or PK write larger than MaxEntryBytes, or a PK
	// row over the KV store's limits (resource_exhausted).
	ErrTooLarge = errors.New("write too large")
	// ErrInvalidBatch: a batch that does not parse or fails its CRC.
	ErrInvalidBatch = errors.New("invalid record batch")
	// ErrNoSpace: the node's disk is (nearly) full: a write refused by
	// Config.SpaceCheck (nothing stored), or one whose entry the log could
	// not write (outcome unknown). Retry once space is freed
	// (resource_exhausted).
	ErrNoSpace = errors.New("not enough disk space")
)

// NotLeaderError is returned (wrapping ErrNotLeader) when another replica
// leads: the caller may forward there.
type NotLeaderError struct {
	Bucket raftmeta.BucketID
	Leader raft.ServerID
	Addr   raft.ServerAddress
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("%v: %v is led by %s (%s)", ErrNotLeader, e.Bucket, e.Leader, e.Addr)
}

func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Config configures one bucket replica.
type Config struct {
	ID        raftmeta.BucketID
	Dir       string             // the replica's directory (log/ and snapshots/ inside)
	LocalID   raft.ServerID      // this replica's raft server id
	LocalAddr raft.ServerAddress // this replica's transport address
	Transport raft.Transport     // owned by the caller; not closed by Close
	// Bootstrap returns the initial configuration; it is called only when
	// the directory holds no raft state (so what it costs is paid by new
	// replicas alone). Nil, or an empty configuration: wait to be added by
	// the group's leader.
	Bootstrap func() ([]raft.Server, error)
	// StartOffset is the data offset a group that Bootstrap starts begins
	// at: 0 for a new bucket, the end of what remote storage holds for a
	// bucket whose group is started anew after it lost every replica
	// (raftmeta.Assignment.StartOffset; a primary-key bucket's also needs
	// Lost).
	StartOffset int64
	// Lost, for a primary-key bucket's group bootstrapped at StartOffset
	// above 0, is what remote storage holds of the group it replaces: the
	// new group's KV state is the lost one's KV snapshot with the
	// changelog after it applied.
	Lost *LostState
	// Generation is the generation of the bucket's group this replica
	// belongs to (raftmeta.Assignment.Generation); the replica only
	// reports it (Generation).
	Generation int64
	// Syncer is the node-wide group-commit syncer (overrides Log.Syncer).
	Syncer *logstore.Syncer
	// Log configures the bucket's logstore; Dir and OffsetFunc are set by
	// Open.
	Log    logstore.Options
	Raft   RaftTuning
	Logger *slog.Logger // nil: discard
	// PK, when set, makes this the replica of a primary-key table bucket
	// (Write, Lookup, PrefixLookup, LimitScan; Append is refused).
	PK *PKConfig
	// SpaceCheck, when set, is asked before the leader proposes new writes
	// (once for all it takes from its queue at a time); an error, which
	// must wrap ErrNoSpace, refuses them: nothing of them is stored and
	// the same writer id and sequence may be retried. Retries of writes
	// already stored are answered all the same. A follower asks it too,
	// for the entries and snapshots its leader sends (when its transport
	// can refuse them: rpc/peer), and refuses those that carry data,
	// falling behind instead of filling its disk. nil: never refused.
	SpaceCheck func() error
	// Writes, when set, is the node's budget of writes held by its bucket
	// leaders (WriteBudget), shared by all its replicas. nil: only this
	// replica's own queue bounds apply.
	Writes *WriteBudget
	// Pump, when set, sends the heartbeats of this group while it leads
	// and stands it for election when its leader's node dies; raft's own
	// timers then run BackstopScale times slower (pump.go). nil: raft's own
	// timers do it all.
	Pump *HeartbeatPump
	// PreferredLeader, when set, names the voter placement wants to lead
	// the group (its first replica; "" when unknown). When the pump stands
	// the group for election, that voter goes first if it is alive, so a
	// new group, or one whose leader's node died, elects it directly
	// instead of electing another and then handing leadership over.
	PreferredLeader func() raft.ServerID
	// SnapshotLog, when set, tells whether a snapshot sent to another
	// replica may carry the local log (snapshot.go): whether every node
	// can read it. nil: always.
	SnapshotLog func() bool

	openLog func(dir string) (dataLog, error) // tests: replaces the logstore
}

// Replica is one bucket replica: a raft group over the bucket's data log.
// All methods may be called from any goroutine.
type Replica struct {
	cfg    Config
	tuning RaftTuning
	logger *slog.Logger
	log    dataLog
	fsm    *FSM
	snaps  *raft.FileSnapshotStore
	raft   *raft.Raft
	verify verifier // linearizable reads of PK state

	quit chan struct{}
	wg   sync.WaitGroup
	// stopping closes when Close begins, before raft shuts down: the FSM
	// goroutine may be waiting on it (a schema version the catalog does not
	// hold yet), and raft's Shutdown waits for that goroutine.
	stopping chan struct{}

	// pks: the schema versions of a PK replica (nil for a log table).
	pks *pkSchemas

	mu     sync.Mutex
	term   *term // nil unless leading
	closed bool

	// parked counts retries that waited for an in-flight original.
	parked atomic.Int64

	// remote is the bucket's remote log (tiering), nil while tiering is
	// off: reads below the local log start are served from it.
	remote atomic.Pointer[tiering.RemoteLog]

	// hookBeforeDrain, when set (tests), runs in the proposer before it
	// drains the queue.
	hookBeforeDrain func()
}

// Open opens (or creates) the replica in cfg.Dir and starts its raft group.
func Open(cfg Config) (*Replica, error) {
	if cfg.Dir == "" || cfg.LocalID == "" || cfg.Transport == nil {
		return nil, fmt.Errorf("replica %v: Dir, LocalID and Transport are required", cfg.ID)
	}
	r := &Replica{
		cfg:      cfg,
		tuning:   cfg.Raft.withDefaults(),
		logger:   cfg.Logger,
		fsm:      newFSM(),
		quit:     make(chan struct{}),
		stopping: make(chan struct{}),
	}
	r.fsm.logStartFn = func() int64 { return r.log.StartOffset() }
	r.fsm.pk = cfg.PK
	if cfg.PK != nil && cfg.Raft.SnapshotThreshold == 0 {
		// A PK snapshot streams the whole KV state: take them less often.
		r.tuning.SnapshotThreshold = pkSnapshotThreshold
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	r.logger = r.logger.With("table", cfg.ID.TableID, "partition", cfg.ID.PartitionID, "bucket", cfg.ID.Bucket, "server", string(cfg.LocalID))
	if cfg.PK != nil {
		r.pks = newPKSchemas(cfg.PK, r.logger)
		r.fsm.pks, r.fsm.stop = r.pks, r.stopping
	}
	hcl := newHCLogger(r.logger, "raft")
	rt := r.tuning
	if cfg.Pump != nil {
		rt = rt.onPump()
	}
	conf, err := rt.raftConfig(cfg.LocalID, hcl)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica %v: %w", cfg.ID, err)
	}
	open := cfg.openLog
	if open == nil {
		open = func(dir string) (dataLog, error) { return openLog(dir, cfg.Log, cfg.Syncer, r.logger) }
	}
	r.log, err = open(filepath.Join(cfg.Dir, "log"))
	if err != nil {
		return nil, fmt.Errorf("replica %v: open log: %w", cfg.ID, err)
	}
	fail := func(err error) (*Replica, error) {
		r.log.Close()
		return nil, fmt.Errorf("replica %v: %w", cfg.ID, err)
	}
	r.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hcl)
	if err != nil {
		return fail(err)
	}
	rlog := raftLog{r.log}
	has, err := raft.HasExistingState(rlog, rlog, r.snaps)
	if err != nil {
		return fail(err)
	}
	if !has && cfg.PK != nil {
		// A replica without raft state starts from empty KV state: drop
		// anything a wiped or half-removed earlier replica left behind.
		if err := cfg.PK.KV.Drop(); err != nil {
			return fail(err)
		}
	}
	if !has && cfg.Bootstrap != nil {
		servers, err := cfg.Bootstrap()
		if err != nil {
			return fail(fmt.Errorf("bootstrap: %w", err))
		}
		switch {
		case len(servers) == 0:
		case cfg.StartOffset > 0:
			if err := r.seed(raft.Configuration{Servers: servers}); err != nil {
				return fail(fmt.Errorf("bootstrap at offset %d: %w", cfg.StartOffset, err))
			}
		default:
			bc := raft.Configuration{Servers: servers}
			if err := raft.BootstrapCluster(conf, rlog, rlog, r.snaps, cfg.Transport, bc); err != nil {
				return fail(fmt.Errorf("bootstrap: %w", err))
			}
		}
	}
	trans, canDefer := wrapTransport(cfg.Transport, func() error { return r.log.SetDeferSync(false) })
	if dt, ok := trans.(*durableTransport); ok {
		dt.pending = r.log.PendingSync
		dt.send = func(tr raft.Transport, id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
			return r.sendSnapshot(tr, cfg.SnapshotLog, id, target, args, resp, data)
		}
	}
	if pt, ok := cfg.Transport.(progressTracker); ok {
		pt.TrackProgress(r.lastIndex)
	}
	r.fsm.durable = func(index uint64) error { return waitDurable(r.log, index) }
	r.fsm.restoreLog = r.restoreLog
	r.fsm.logNextOffset = func() int64 { return r.log.NextOffset() }
	r.raft, err = raft.NewRaft(conf, r.fsm, rlog, rlog, r.snaps, trans)
	if err != nil {
		return fail(fmt.Errorf("start raft: %w", err))
	}
	if canDefer {
		if c := r.raft.GetConfiguration(); c.Error() == nil && soleVoter(c.Configuration(), cfg.LocalID) {
			if err := r.log.SetDeferSync(true); err != nil {
				return fail(err)
			}
		}
		if g, ok := cfg.Transport.(appendAckGater); ok && !r.tuning.SerialLeaderSync {
			g.GateAppendAck(ackSynced(r.log))
			r.log.SetDeferWhen(leaderDefers(r.raft))
		}
	}
	if g, ok := cfg.Transport.(timeoutNowGater); ok {
		g.GateTimeoutNow(r.admitTransfer)
	}
	if g, ok := cfg.Transport.(writesGater); ok && cfg.SpaceCheck != nil {
		g.GateWrites(admitWrites(cfg.ID, cfg.SpaceCheck))
	}
	r.verify.confirm = r.confirmLeadership
	if p := cfg.Pump; p != nil {
		p.add(r)
	}
	r.wg.Go(r.monitor)
	return r, nil
}

// monitor starts a proposer term when this replica gains leadership and
// stops it when it loses it.
func (r *Replica) monitor() {
	leaderCh := r.raft.LeaderCh()
	for {
		select {
		case isLeader := <-leaderCh:
			r.stopTerm()
			if isLeader {
				t := newTerm(r)
				r.mu.Lock()
				r.term = t
				r.mu.Unlock()
				go t.run() // joined through t.done by stopTerm
			}
		case <-r.quit:
			r.stopTerm()
			if p := r.cfg.Pump; p != nil {
				p.remove(r)
			}
			return
		}
	}
}

func (r *Replica) stopTerm() {
	r.mu.Lock()
	t := r.term
	r.term = nil
	r.mu.Unlock()
	if t != nil {
		close(t.stop)
		<-t.done
	}
}

// notReadyErr says why Appends are not accepted now.
func (r *Replica) notReadyErr() error {
	if r.isClosed() {
		return ErrClosed
	}
	addr, id := r.raft.LeaderWithID()
	switch id {
	case "":
		return fmt.Errorf("%w: %v: election in progress; retry", ErrNoLeader, r.cfg.ID)
	case r.cfg.LocalID:
		return fmt.Errorf("%w: %v: leader elected here, waiting for its barrier; retry", ErrNoLeader, r.cfg.ID)
	default:
		return &NotLeaderError{Bucket: r.cfg.ID, Leader: id, Addr: addr}
	}
}

// ServingReads returns nil when this replica is the leader and its barrier
// has applied every entry of earlier terms. Reads are served by the leader
// only: a restarted or lagging replica's applied state can be behind what
// clients were already acknowledged, and a read must never go backwards.
func (r *Replica) ServingReads() error {
	r.mu.Lock()
	t := r.term
	r.mu.Unlock()
	if t != nil {
		t.mu.Lock()
		ready := t.ready
		t.mu.Unlock()
		if ready {
			return nil
		}
	}
	return r.notReadyErr()
}

// lostErr is the error of requests whose outcome is unknown.
func (r *Replica) lostErr() error {
	if r.isClosed() {
		return fmt.Errorf("%w: outcome unknown, retry with the same writer id and sequence", ErrClosed)
	}
	if err := r.notReadyErr(); !errors.Is(err, ErrNoLeader) {
		return err
	}
	return fmt.Errorf("%w: %v: leadership lost; outcome unknown, retry with the same writer id and sequence", ErrNotLeader, r.cfg.ID)
}

func (r *Replica) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Append stores batches (record batches; the callee owns them after the
// call) as one request of writer writerID with sequence seq, and returns
// once they are committed and applied: the base offset of the first batch
// and the total record count. writerID 0 disables idempotence. A retry of an
// applied or in-flight (writerID, seq) returns the first attempt's result and
// stores nothing.
func (r *Replica) Append(ctx context.Context, batches [][]byte, writerID int64, seq int32) (int64, int32, error) {
	req := &appendReq{batches: batches, writer: writerID, seq: seq, done: make(chan appendResult, 1)}
	for i, b := range batches {
		h, n, err := checkBatch(b)
		if err == nil && n != len(b) {
			err = fmt.Errorf("%d trailing bytes after the batch", len(b)-n)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%w: %v batch %d: %w", ErrInvalidBatch, r.cfg.ID, i, err)
		}
		req.size += n
		if int64(req.count)+int64(h.Count) > 1<<30 {
			return 0, 0, fmt.Errorf("%w: %v: more than 2^30 records in one append", ErrTooLarge, r.cfg.ID)
		}
		req.count += h.Count
	}
	if len(batches) == 0 {
		return 0, 0, fmt.Errorf("%w: %v: no batches", ErrInvalidBatch, r.cfg.ID)
	}
	if req.size > r.tuning.MaxEntryBytes {
		return 0, 0, fmt.Errorf("%w: %v: %d bytes in one append, limit %d", ErrTooLarge, r.cfg.ID, req.size, r.tuning.MaxEntryBytes)
	}
	if r.cfg.PK != nil {
		return 0, 0, fmt.Errorf("%w: %v belongs to a primary-key table; its log is the changelog the leader computes", ErrNotPK, r.cfg.ID)
	}
	return r.submit(ctx, req)
}

// submit queues a request on the leader's proposer and waits for its result.
func (r *Replica) submit(ctx context.Context, req *appendReq) (int64, int32, error) {
	r.mu.Lock()
	t, closed := r.term, r.closed
	r.mu.Unlock()
	if closed {
		return 0, 0, ErrClosed
	}
	if t == nil {
		return 0, 0, r.notReadyErr()
	}
	held := int64(req.size) // what enqueue takes (the proposer may change req.size)
	if err := t.enqueue(req); err != nil {
		return 0, 0, err
	}
	// Given back when this caller stops waiting, answered or not: a caller
	// that gives up leaves its write queued a little longer than counted,
	// but no write is ever counted forever.
	defer r.cfg.Writes.give(held)
	select {
	case res := <-req.done:
		return res.base, res.count, res.err
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("%v append: %w (outcome unknown)", r.cfg.ID, ctx.Err())
	}
}

// Fetch returns copies of committed batches holding offsets >= offset, about
// maxBytes at most (at least one batch when any is available; 0 means 1 MiB),
// with the high watermark and log start offset. The first batch may start
// before offset. When offset is the high watermark (or beyond it but within
// the stored log, e.g. while a restarted replica replays) it waits up to
// maxWait for data and returns no batches if none came. Offsets below the
// log start or beyond the stored log get ErrOffsetOutOfRange, whose message
// names the range the log holds (callers name the bucket and the offset).
//
// Fetch is served by the leader only (see ServingReads); FetchLocal reads
// this replica's own applied state, wherever it is.
func (r *Replica) Fetch(ctx context.Context, offset int64, maxBytes int, maxWait time.Duration) (batches [][]byte, hw, logStart int64, err error) {
	if err := r.ServingReads(); err != nil {
		return nil, 0, 0, err
	}
	return r.FetchLocal(ctx, offset, maxBytes, maxWait)
}

// FetchLocal is Fetch without the leadership check: it serves what this
// replica has applied, which is committed but may lag the leader. It is for
// comparing replicas and for follower reads that accept lag.
func (r *Replica) FetchLocal(ctx context.Context, offset int64, maxBytes int, maxWait time.Duration) (batches [][]byte, hw, logStart int64, err error) {
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	var timer <-chan time.Time
	for {
		if r.isClosed() {
			return nil, 0, 0, ErrClosed
		}
		var ch <-chan struct{}
		hw, ch = r.fsm.wait()
		logStart = r.LogStartOffset()
		if rl := r.remote.Load(); rl != nil && offset < logStart {
			// The remote log's listing is refreshed once per tiering pass:
			// other replicas may have uploaded what this one lacks since.
			if err := rl.Refresh(); err != nil {
				return nil, hw, logStart, fmt.Errorf("%v: list the remote log: %w", r.cfg.ID, err)
			}
			logStart = r.LogStartOffset()
		}
		if offset < logStart || (offset > hw && offset > r.log.NextOffset()) {
			return nil, hw, logStart, fmt.Errorf("%w: the log holds offsets [%d, %d)", ErrOffsetOutOfRange, logStart, hw)
		}
		if offset < hw {
			break
		}
		if maxWait <= 0 {
			return nil, hw, logStart, nil
		}
		if timer == nil {
			tm := time.NewTimer(maxWait)
			defer tm.Stop()
			timer = tm.C
		}
		select {
		case <-ch:
		case <-timer:
			return nil, hw, logStart, nil
		case <-ctx.Done():
			return nil, hw, logStart, ctx.Err()
		}
	}
	size := 0
	var ferr error
	read := r.log.Read
	if rl := r.remote.Load(); rl != nil && offset < r.localLogStart() {
		read = rl.Read // tiered: only the remote log holds it
	}
	err = read(offset, hw, maxBytes, func(index uint64, base int64, count int32, data []byte) bool {
		if len(data) < 1 || data[0] != cmdAppend {
			ferr = fmt.Errorf("%v: entry %d holds no append command", r.cfg.ID, index)
			return false
		}
		// The batches taken from one entry are contiguous: copy that span once.
		from, to, more := -1, 0, true
		var spans [][2]int
		pos := 1
		ferr = forEachBatch(data[1:], func(h batchHeader, b []byte) error {
			start := pos
			pos += len(b)
			if h.Base+int64(h.Count) <= offset {
				return nil
			}
			if h.Base >= hw || (len(batches)+len(spans) > 0 && size+len(b) > maxBytes) {
				more = false
				return errStop
			}
			if from < 0 {
				from = start
			}
			to = pos
			spans = append(spans, [2]int{start, pos})
			size += len(b)
			return nil
		})
		if ferr == errStop {
			ferr = nil
		}
		if ferr != nil || from < 0 {
			return ferr == nil && more && size < maxBytes
		}
		own := append([]byte(nil), data[from:to]...)
		for _, sp := range spans {
			batches = append(batches, own[sp[0]-from:sp[1]-from:sp[1]-from])
		}
		return more && size < maxBytes
	})
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, hw, logStart, fmt.Errorf("%v fetch at %d: %w", r.cfg.ID, offset, mapLogErr(err))
	}
	return batches, hw, logStart, nil
}

var errStop = errors.New("stop")

// HighWatermark is the offset after the last committed and applied record.
func (r *Replica) HighWatermark() int64 { return r.fsm.HighWatermark() }

// LogStartOffset is the first offset this replica can read: where its
// remote log starts when that runs without a gap up to the local log,
// else the local log start (localLogStart).
func (r *Replica) LogStartOffset() int64 {
	start := r.localLogStart()
	if rl := r.remote.Load(); rl != nil {
		if s, e := rl.Range(); s < start && e >= start {
			return s
		}
	}
	return start
}

// localLogStart is the first offset still stored locally. A log that
// holds no records (a new follower that installed a snapshot: raft emptied
// its log) starts at the high watermark.
func (r *Replica) localLogStart() int64 {
	start := r.log.StartOffset()
	if r.log.NextOffset() <= start {
		start = max(start, r.fsm.HighWatermark())
	}
	return start
}

// OffsetForTimestamp is the first committed offset whose commit timestamp
// is >= ms, or the high watermark if there is none.
func (r *Replica) OffsetForTimestamp(ms int64) int64 {
	hw := r.HighWatermark()
	start, local := r.LogStartOffset(), r.localLogStart()
	if rl := r.remote.Load(); rl != nil && start < local {
		if off, ok := rl.OffsetForTimestamp(ms); ok && off < local {
			return max(off, start)
		}
	}
	off, ok := r.log.OffsetForTimestamp(ms)
	if !ok || off > hw {
		return hw
	}
	return max(off, start)
}

// IsLeader reports whether this replica leads its group.
func (r *Replica) IsLeader() bool { return r.raft.State() == raft.Leader }

// Leader is the current leader's server id ("" if unknown).
func (r *Replica) Leader() raft.ServerID {
	_, id := r.raft.LeaderWithID()
	return id
}

// WaitLeader waits until the group has a leader and, if it is this replica,
// until it accepts Appends.
func (r *Replica) WaitLeader(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if r.isClosed() {
			return ErrClosed
		}
		switch id := r.Leader(); id {
		case "":
		case r.cfg.LocalID:
			if r.ServingReads() == nil {
				return nil
			}
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v: waiting for a leader: %w", r.cfg.ID, ctx.Err())
		case <-tick.C:
		}
	}
}

// Raft exposes the raft group (membership changes, leadership transfer).
func (r *Replica) Raft() *raft.Raft { return r.raft }

// EnforceRetention deletes closed segments whose records are all older than
// ttl and below keepFrom (a lake table's rows not yet in the lake stay;
// math.MaxInt64: no such bound), never beyond the last raft snapshot (it
// takes one first when the latest does not cover them; when nothing
// expired it does nothing).
func (r *Replica) EnforceRetention(ttl time.Duration, keepFrom int64) error {
	if ttl <= 0 {
		return nil
	}
	cutoff := time.Now().Add(-ttl).UnixMilli()
	need, limit := r.log.Expired(cutoff), uint64(math.MaxUint64)
	if keepFrom < math.MaxInt64 {
		limit = r.log.Covered(keepFrom, 0)
		need = min(need, limit)
	}
	n, err := r.trimHead(need, func(maxIndex uint64) (int, error) {
		return r.log.DeleteBefore(cutoff, min(maxIndex, limit))
	})
	if err != nil {
		return fmt.Errorf("%v retention: %w", r.cfg.ID, err)
	}
	if n > 0 {
		r.logger.Info("retention deleted segments", "segments", n, "log_start", r.LogStartOffset())
	}
	return nil
}

// trimHead deletes segments at the head of the log with del, which must
// not pass the raft index it is given: the last raft snapshot, since raft
// replays the log from there. need is the last raft index del would
// delete; when the latest snapshot does not reach it, trimHead takes one
// first (for a primary-key bucket, its KV state). need 0: nothing to do.
func (r *Replica) trimHead(need uint64, del func(maxIndex uint64) (int, error)) (int, error) {
	if r.isClosed() {
		return 0, ErrClosed
	}
	if need == 0 {
		return 0, nil // no snapshot: a PK snapshot is its whole KV state
	}
	metas, err := r.snaps.List()
	if err != nil {
		return 0, fmt.Errorf("list snapshots: %w", err)
	}
	// Only when something was applied since the latest snapshot: a
	// follower's log can hold entries it has not applied yet (after a
	// restart), and raft would fail (and log) every pass until it has.
	if len(metas) == 0 || metas[0].Index < need && r.raft.AppliedIndex() > metas[0].Index {
		if err := r.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return 0, fmt.Errorf("snapshot: %w", err)
		}
		if metas, err = r.snaps.List(); err != nil {
			return 0, fmt.Errorf("list snapshots: %w", err)
		}
	}
	if len(metas) == 0 {
		return 0, nil
	}
	return del(metas[0].Index)
}

// waitRaft waits for f as f.Error() does, but gives up with
// raft.ErrRaftShutdown once the replica is closing (quit is closed after
// raft has shut down). hashicorp/raft leaves an Apply or Barrier future
// unanswered for good when it shuts down with the entry committed but not
// yet taken by its FSM goroutine (runFSM returns without draining the
// batches queued for it); a term waiting for such a future would hold
// Close forever. The goroutine waiting for f is then left behind.
func (r *Replica) waitRaft(f raft.Future) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return err
	case <-r.quit:
		return raft.ErrRaftShutdown
	}
}

// Close stops raft, fails pending requests, wakes fetchers and closes the
// log. The transport stays open.
func (r *Replica) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stopping)
	err := r.raft.Shutdown().Error()
	close(r.quit)
	r.wg.Wait()
	r.fsm.close()
	if rl := r.remote.Load(); rl != nil {
		rl.Close()
	}
	if lerr := r.log.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("%v close: %w", r.cfg.ID, err)
	}
	return nil
}

// stats reports applied raft index and LogCommand entries applied (tests,
// benchmarks).
func (r *Replica) stats() (applied, entries uint64) { return r.fsm.stats() }

// queued is the number of queued requests (tests).
func (r *Replica) queued() int {
	r.mu.Lock()
	t := r.term
	r.mu.Unlock()
	if t == nil {
		return 0
	}
	return t.queued()
}
