package replica

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fluss-node/fluss-node/kvstore"
)

// appendReq is one Append call waiting for its result.
type appendReq struct {
	batches [][]byte // nil for a PK write until the proposer merged it
	pk      *PKWrite // a primary-key write (the proposer computes batches)
	writer  int64
	seq     int32
	size    int   // total batch bytes
	count   int32 // total records
	done    chan appendResult

	// Set by the proposer.
	base int64
	vs   *viewSeq     // this request's slot in the writer view (writer != 0)
	dups []*appendReq // retries of this request that wait for its result; guarded by term.mu
}

type appendResult struct {
	base  int64
	count int32
	err   error
}

func (q *appendReq) finish(base int64, count int32, err error) {
	q.done <- appendResult{base: base, count: count, err: err} // cap 1, sent once
}

// viewSeq is one sequence of a writer as the leader sees it: applied
// (req == nil) or in flight (req is the original request).
type viewSeq struct {
	SeqResult
	req *appendReq
}

// inflight is one proposed raft entry and the requests it carries.
type inflight struct {
	f    raft.ApplyFuture
	reqs []*appendReq
}

// term is the proposer of one leadership term. Its goroutine (run) exists
// only while this replica leads; the monitor starts and stops it.
//
// Lock order: Replica.mu is never held while taking term.mu.
type term struct {
	r      *Replica
	since  time.Time     // when the monitor saw this replica become leader
	stop   chan struct{} // closed by the monitor
	done   chan struct{} // closed when run and its completer have returned
	signal chan struct{} // cap 1: work queued

	mu          sync.Mutex
	ready       bool // accepting Appends
	failed      bool // an entry failed: stop proposing, re-init
	queue       []*appendReq
	queuedBytes int
	view        map[int64][]*viewSeq // writer → window, oldest first

	// Owned by the run goroutine (pw is internally locked: the completion
	// goroutine calls Applied).
	pw *kvstore.PreWriteBuffer // PK replicas: rows proposed, not yet applied
	// appliedUpTo: the offset after the last entry the completer saw applied
	// (set by the completion goroutine, read by the proposer).
	appliedUpTo atomic.Int64
	next        int64  // proposed next offset
	lastTs      int64  // last commit timestamp stamped
	proposed    uint64 // entries proposed in this term
}

// viewPruneEvery is how many proposed entries pass between prunes of the
// writer view (writers the FSM expired and with nothing in flight are
// dropped, so a long leadership does not grow the view without bound).
const viewPruneEvery = 4096

// pruneView drops writers the FSM no longer tracks and that have nothing in
// flight. Answering a retry from a pruned writer's window would still have
// been correct; pruning only bounds memory.
func (t *term) pruneView() {
	live := t.r.fsm.writerIDs()
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, win := range t.view {
		if _, ok := live[id]; ok {
			continue
		}
		busy := false
		for _, v := range win {
			busy = busy || v.req != nil
		}
		if !busy {
			delete(t.view, id)
		}
	}
}

func newTerm(r *Replica) *term {
	return &term{
		r:      r,
		since:  time.Now(),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		signal: make(chan struct{}, 1),
	}
}

func (t *term) wake() {
	select {
	case t.signal <- struct{}{}:
	default:
	}
}

// enqueue queues q, taking its size from the node's write budget, or says
// why it cannot; the caller gives the size back when it stops waiting.
func (t *term) enqueue(q *appendReq) error {
	tu := &t.r.tuning
	t.mu.Lock()
	if !t.ready {
		t.mu.Unlock()
		return t.r.notReadyErr()
	}
	// A request alone is always taken (MaxEntryBytes bounds it), however
	// large against MaxQueuedBytes.
	if len(t.queue) >= tu.MaxQueuedRequests || len(t.queue) > 0 && t.queuedBytes+q.size > tu.MaxQueuedBytes {
		n, b := len(t.queue), t.queuedBytes
		t.mu.Unlock()
		return fmt.Errorf("%w: %v has %d requests (%d bytes) queued; retry later", ErrBusy, t.r.cfg.ID, n, b)
	}
	if err := t.r.cfg.Writes.take(int64(q.size)); err != nil {
		t.mu.Unlock()
		return err
	}
	t.queue = append(t.queue, q)
	t.queuedBytes += q.size
	t.mu.Unlock()
	t.wake()
	return nil
}

func (t *term) queued() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queue)
}

func (t *term) stopped() bool {
	select {
	case <-t.stop:
		return true
	default:
		return false
	}
}

// run is the term goroutine: barrier, init, propose; again after a failed
// entry while still leader.
func (t *term) run() {
	defer close(t.done)
	defer t.failQueued()
	for !t.stopped() {
		if !t.becomeReady() {
			// Leadership lost before we could serve: wait for the monitor.
			<-t.stop
			return
		}
		t.proposeLoop()
	}
}

// becomeReady waits for a barrier (every entry of earlier terms applied),
// then starts the proposer view from the applied state.
func (t *term) becomeReady() bool {
	r := t.r
	for {
		if t.stopped() || r.raft.State() != raft.Leader {
			return false
		}
		err := r.waitRaft(r.raft.Barrier(0))
		if err == nil {
			break
		}
		r.logger.Warn("bucket leader barrier failed", "err", err)
		if err == raft.ErrRaftShutdown {
			return false
		}
		// E.g. a leadership transfer in progress: back off, don't spin.
		select {
		case <-t.stop:
			return false
		case <-time.After(r.tuning.HeartbeatTimeout / 10):
		}
	}
	next, maxTs, writers := r.fsm.view()
	view := make(map[int64][]*viewSeq, len(writers))
	for id, rs := range writers {
		vs := make([]*viewSeq, len(rs))
		for i, sr := range rs {
			vs[i] = &viewSeq{SeqResult: sr}
		}
		view[id] = vs
	}
	t.next, t.lastTs = next, maxTs
	if r.cfg.PK != nil {
		t.pw = kvstore.NewPreWriteBuffer() // DESIGN §6: a new leader starts empty
	}
	t.mu.Lock()
	t.view, t.failed, t.ready = view, false, true
	t.mu.Unlock()
	return true
}

// fail stops the term from proposing after a failed entry (outcome unknown)
// and fails everything queued.
func (t *term) fail() {
	t.mu.Lock()
	t.failed, t.ready = true, false
	t.mu.Unlock()
	t.failQueued()
	t.wake()
}

func (t *term) failQueued() {
	t.mu.Lock()
	t.ready = false
	q := t.queue
	t.queue, t.queuedBytes = nil, 0
	t.mu.Unlock()
	err := t.r.lostErr()
	for _, req := range q {
		t.finishAll(req, 0, 0, err)
	}
}

// finishAll answers req and every duplicate that waits for it.
func (t *term) finishAll(req *appendReq, base int64, count int32, err error) {
	t.mu.Lock()
	dups := req.dups
	req.dups = nil
	if req.vs != nil && err == nil {
		req.vs.req = nil // applied: later retries are answered directly
	}
	t.mu.Unlock()
	req.finish(base, count, err)
	for _, d := range dups {
		d.finish(base, count, err)
	}
}

// proposeLoop drains the queue into raft entries until stopped or failed.
func (t *term) proposeLoop() {
	comp := make(chan inflight, t.r.tuning.MaxInflightEntries)
	completed := make(chan struct{})
	go func() {
		defer close(completed)
		t.complete(comp)
	}()
	defer func() {
		close(comp)
		select {
		case <-completed:
		case <-t.r.quit:
			// raft has shut down; the completer may wait forever on an
			// entry raft dropped (see waitRaft). Closing must not.
		}
	}()
	for {
		select {
		case <-t.stop:
			return
		case <-t.signal:
		}
		if h := t.r.hookBeforeDrain; h != nil {
			h()
		}
		t.mu.Lock()
		if t.failed {
			t.mu.Unlock()
			return
		}
		reqs := t.queue
		t.queue, t.queuedBytes = nil, 0
		accepted := t.dedupe(reqs)
		t.mu.Unlock()
		accepted = t.assign(accepted)
		for len(accepted) > 0 {
			data, packed, rest := t.buildEntry(accepted)
			if t.isFailed() {
				// An earlier entry failed: these were never proposed.
				err := t.r.lostErr()
				for _, req := range accepted {
					t.finishAll(req, 0, 0, err)
				}
				return
			}
			comp <- inflight{f: t.r.raft.Apply(data, 0), reqs: packed}
			accepted = rest
			if t.proposed++; t.proposed%viewPruneEvery == 0 {
				t.pruneView()
			}
		}
	}
}

func (t *term) isFailed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// dedupe answers or parks duplicates and registers the rest in the writer
// view, in queue order. Caller holds t.mu.
func (t *term) dedupe(reqs []*appendReq) []*appendReq {
	out := reqs[:0]
	for _, req := range reqs {
		if req.writer != 0 {
			win := t.view[req.writer]
			if n := len(win); n > 0 && req.seq <= win[n-1].Seq {
				var hit *viewSeq
				for _, v := range win {
					if v.Seq == req.seq {
						hit = v
						break
					}
				}
				switch {
				case hit == nil:
					req.finish(0, 0, fmt.Errorf("%w: %v writer %d sequence %d: newest kept is %d, oldest kept is %d",
						ErrOutOfOrderSequence, t.r.cfg.ID, req.writer, req.seq, win[n-1].Seq, win[0].Seq))
				case hit.req == nil:
					req.finish(hit.Base, hit.Count, nil)
				default:
					hit.req.dups = append(hit.req.dups, req)
					t.r.parked.Add(1)
				}
				continue
			}
			v := &viewSeq{SeqResult: SeqResult{Seq: req.seq}, req: req} // Base, Count: assign
			win = append(win, v)
			if len(win) > WriterWindow {
				win = append(win[:0], win[len(win)-WriterWindow:]...)
			}
			t.view[req.writer] = win
			req.vs = v
		}
		out = append(out, req)
	}
	return out
}

// assign merges PK writes (outside t.mu: it reads the KV store) and gives
// every request its offsets, in order. A PK write the merge engine refuses
// is answered with the error and leaves the writer view, so a retry is
// merged afresh; so are all of them while Config.SpaceCheck refuses
// writes. It returns the requests to propose.
func (t *term) assign(reqs []*appendReq) []*appendReq {
	if check := t.r.cfg.SpaceCheck; check != nil && len(reqs) > 0 {
		if err := check(); err != nil {
			for _, req := range reqs {
				t.reject(req, err)
			}
			return nil
		}
	}
	out := reqs[:0]
	for _, req := range reqs {
		if req.pk != nil {
			if err := t.preparePK(req); err != nil {
				t.reject(req, err)
				continue
			}
		}
		req.base = t.next
		t.next += int64(req.count)
		out = append(out, req)
	}
	t.mu.Lock()
	for _, req := range out {
		if req.vs != nil {
			req.vs.Base, req.vs.Count = req.base, req.count
		}
	}
	t.mu.Unlock()
	return out
}

// reject answers a request that will not be proposed, and its parked
// duplicates, with err, and removes it from the writer view.
func (t *term) reject(req *appendReq, err error) {
	t.mu.Lock()
	if req.vs != nil {
		win := t.view[req.writer]
		if i := slices.Index(win, req.vs); i >= 0 {
			t.view[req.writer] = slices.Delete(win, i, i+1)
		}
	}
	dups := req.dups
	req.dups = nil
	t.mu.Unlock()
	req.finish(0, 0, err)
	for _, d := range dups {
		d.finish(0, 0, err)
	}
}

// buildEntry packs requests from the front of reqs into one entry of at
// most MaxEntryBytes (at least one request), stamping offsets and one commit
// timestamp. It returns the entry, the requests packed and the requests left.
func (t *term) buildEntry(reqs []*appendReq) (data []byte, packed, rest []*appendReq) {
	limit := t.r.tuning.MaxEntryBytes
	n, size := 0, 0
	for n < len(reqs) && (n == 0 || size+reqs[n].size <= limit) {
		size += reqs[n].size
		n++
	}
	ts := max(time.Now().UnixMilli(), t.lastTs)
	t.lastTs = ts
	data = make([]byte, 1, 1+size)
	data[0] = cmdAppend
	for _, req := range reqs[:n] {
		base := req.base
		for _, b := range req.batches {
			start := len(data)
			data = append(data, b...)
			stampBatch(data[start:], base, ts, req.writer, req.seq)
			h, _, _ := peekBatch(b) // validated in Append
			base += int64(h.Count)
		}
	}
	return data, reqs[:n:n], reqs[n:]
}

// entryErr is the answer to the requests of an entry that failed with err.
// An entry the log could not store (the disk said no) cost the group its
// leadership, and its writers hear the disk's reason: ErrNoSpace for a
// full disk (resource_exhausted), else ErrNotLeader with the cause (EIO, a
// filesystem remounted read-only; clients retry). Otherwise the entry was
// lost with the leadership.
func (t *term) entryErr(err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %v: the log could not store the entry (%w); outcome unknown, retry with the same writer id and sequence once space is freed", ErrNoSpace, t.r.cfg.ID, err)
	case errors.As(err, &errno):
		return fmt.Errorf("%w: %v: the log could not store the entry (%w); outcome unknown, retry with the same writer id and sequence", ErrNotLeader, t.r.cfg.ID, err)
	}
	return t.r.lostErr()
}

// complete waits for proposed entries in order and answers their requests.
func (t *term) complete(comp <-chan inflight) {
	for inf := range comp {
		if err := inf.f.Error(); err != nil {
			t.r.logger.Warn("bucket entry not committed; failing its requests", "err", err, "requests", len(inf.reqs))
			t.fail()
			lost := t.entryErr(err)
			for _, req := range inf.reqs {
				t.finishAll(req, 0, 0, lost)
			}
			continue
		}
		if t.pw != nil && len(inf.reqs) > 0 {
			// The proposer drops the buffered rows up to here itself
			// (preparePK), before it opens its next read view.
			last := inf.reqs[len(inf.reqs)-1]
			t.appliedUpTo.Store(last.base + int64(last.count))
		}
		for _, req := range inf.reqs {
			t.finishAll(req, req.base, req.count, nil)
		}
	}
}
