package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/yamux"
)

// Heartbeat coalescing (WIRE.md "Heartbeat batches"). Every Raft group sends
// its followers a heartbeat every HeartbeatTimeout/10; with hundreds of
// groups per node pair, one frame pair and four syscalls per heartbeat made
// them most of an idle node's CPU. A heartbeat waits up to
// Options.HeartbeatBatchDelay for the
// heartbeats other groups send to the same node, and they travel as one
// batch frame on one stream; the remote runs each group's heartbeat handler
// in turn and answers one batch frame. A remote that does not know batches
// (an older binary answers the stream header with an error) gets
// per-group heartbeats, as before.

const (
	kindHeartbeats     byte = 3
	typeHeartbeatBatch byte = 6
	hbStreamName            = "heartbeats"

	// defaultHeartbeatBatchDelay is Options.HeartbeatBatchDelay's default.
	defaultHeartbeatBatchDelay = 10 * time.Millisecond
	// hbMaxBatch bounds the heartbeats of one frame.
	hbMaxBatch = 4096
)

// HeartbeatStats reports the heartbeats this Mux sent in batches and the
// batch frames that carried them.
func (m *Mux) HeartbeatStats() (heartbeats, frames int64) {
	return m.hbCalls.Load(), m.hbFrames.Load()
}

// CachedHeartbeats reports the heartbeats groups answered from their
// heartbeat cache instead of sending them (hbcache.go).
func (m *Mux) CachedHeartbeats() int64 { return m.hbCached.Load() }

// RepeatedAppends reports the idle AppendEntries pipelines answered
// themselves instead of sending them (hbcache.go).
func (m *Mux) RepeatedAppends() int64 { return m.appendsRepeated.Load() }

// errNoBatches: the remote does not accept heartbeat batches; send
// heartbeats one by one.
var errNoBatches = errors.New("remote does not accept heartbeat batches")

// hbCall is one group's heartbeat waiting in a batch.
type hbCall struct {
	group string
	req   *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	err   error
	done  chan struct{}
}

// hbBatcher collects the heartbeats for one remote address. Its flushing
// goroutine runs while heartbeats are queued and exits when none are.
type hbBatcher struct {
	m      *Mux
	target string

	mu      sync.Mutex
	queue   []*hbCall
	running bool
	kick    chan struct{} // flush now: an urgent heartbeat is queued

	unsupported atomic.Bool   // the remote answered the stream header with an error
	st          *yamux.Stream // owned by the flushing goroutine
}

func (m *Mux) batcher(target string) *hbBatcher {
	m.hbMu.Lock()
	defer m.hbMu.Unlock()
	b := m.hb[target]
	if b == nil {
		b = &hbBatcher{m: m, target: target, kick: make(chan struct{}, 1)}
		m.hb[target] = b
	}
	return b
}

// heartbeat sends one group's heartbeat in the next batch to target and
// waits for its answer. An urgent heartbeat (a leadership check a read
// waits for) flushes the batch at once instead of after the batch delay. It
// returns errNoBatches when target does not accept batches.
func (m *Mux) heartbeat(target, group string, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, urgent bool) error {
	b := m.batcher(target)
	if b.unsupported.Load() {
		return errNoBatches
	}
	c := &hbCall{group: group, req: req, resp: resp, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		// Under m.mu, as Close: no wg.Add once Close waits.
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			b.mu.Lock()
			b.running = false
			b.mu.Unlock()
			return ErrClosed
		}
		m.wg.Add(1)
		m.mu.Unlock()
		go b.run()
	}
	if urgent {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
	select {
	case <-c.done:
		return c.err
	case <-m.done:
		return ErrClosed
	}
}

// run flushes the queue until it stays empty for one round.
func (b *hbBatcher) run() {
	defer b.m.wg.Done()
	delay := b.m.opts.HeartbeatBatchDelay
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
		case <-b.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-b.m.done:
			b.mu.Lock()
			calls := b.queue
			b.queue, b.running = nil, false
			b.mu.Unlock()
			finish(calls, ErrClosed)
			b.closeStream()
			return
		}
		b.mu.Lock()
		calls := b.queue
		b.queue = nil
		if len(calls) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		for len(calls) > 0 {
			n := min(len(calls), hbMaxBatch)
			b.flush(calls[:n])
			calls = calls[n:]
		}
		timer.Reset(delay)
	}
}

func finish(calls []*hbCall, err error) {
	for _, c := range calls {
		if err != nil {
			c.err = err
		}
		close(c.done)
	}
}

func (b *hbBatcher) closeStream() {
	if b.st != nil {
		abort(b.st)
		b.st = nil
	}
}

// flush sends one batch and hands every call its answer or an error.
func (b *hbBatcher) flush(calls []*hbCall) {
	b.m.hbFrames.Add(1)
	b.m.hbCalls.Add(int64(len(calls)))
	err := b.exchange(calls)
	if err != nil {
		b.closeStream()
		if errors.Is(err, ErrBadHeader) {
			b.unsupported.Store(true)
			err = errNoBatches
		}
		err = fmt.Errorf("peer: heartbeats to %s: %w", b.target, err)
	}
	finish(calls, err)
}

// exchange writes the batch frame and reads the answer into the calls.
func (b *hbBatcher) exchange(calls []*hbCall) error {
	cs := getCodec()
	defer putCodec(cs)
	cs.w.b = cs.w.b[:0]
	if b.st == nil {
		st, err := b.m.openStream(b.target)
		if err != nil {
			return err
		}
		b.st = st
		if cs.w.b, err = appendHeader(cs.w.b, kindHeartbeats, hbStreamName); err != nil {
			return err
		}
	}
	// Batch frame: uvarint n, then per heartbeat: uvarint len(group) |
	// group | an embedded AppendEntries frame.
	off := len(cs.w.b)
	cs.w.b = append(cs.w.b, 0, 0, 0, 0, typeHeartbeatBatch)
	cs.w.b = binary.AppendUvarint(cs.w.b, uint64(len(calls)))
	for _, c := range calls {
		cs.w.b = binary.AppendUvarint(cs.w.b, uint64(len(c.group)))
		cs.w.b = append(cs.w.b, c.group...)
		if _, err := cs.encodeFrame(typeAppendEntries, c.req); err != nil {
			return err
		}
	}
	buf := finishFrame(cs.w.b, off)
	b.st.SetDeadline(time.Now().Add(b.m.opts.RPCTimeout))
	if _, err := b.st.Write(buf); err != nil {
		return err
	}
	status, body, err := readFrame(b.st, &cs.rbuf, b.m.opts.MaxFrameSize)
	if err != nil {
		return err
	}
	if status != statusOK {
		return b.m.remoteErr(b.target, status, body)
	}
	b.st.SetDeadline(time.Time{})
	return readBatchAnswer(cs, body, calls, b.m.opts.MaxFrameSize, func(status byte, item []byte) error {
		return b.m.remoteErr(b.target, status, item)
	})
}

// readBatchAnswer decodes the answer to a heartbeat batch into calls: uvarint
// n, then per heartbeat an embedded frame, status OK with the msgpack
// AppendEntriesResponse or an error status for that heartbeat (its error
// made by statusErr). It never panics on malformed bytes.
func readBatchAnswer(cs *codecState, body []byte, calls []*hbCall, maxFrame int, statusErr func(status byte, item []byte) error) error {
	n, w := binary.Uvarint(body)
	if w <= 0 || n != uint64(len(calls)) {
		return fmt.Errorf("%w: heartbeat batch answer holds %d answers for %d heartbeats", ErrBadFrame, n, len(calls))
	}
	body = body[w:]
	for _, c := range calls {
		l, st, err := parseFrameHeader(body, maxFrame)
		if err != nil || len(body) < frameHdrLen+l {
			return fmt.Errorf("%w: heartbeat batch answer truncated", ErrBadFrame)
		}
		item := body[frameHdrLen : frameHdrLen+l]
		body = body[frameHdrLen+l:]
		if st != statusOK {
			c.err = statusErr(st, item)
			continue
		}
		if err := cs.decode(item, c.resp); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d bytes after the heartbeat batch answer", ErrBadFrame, len(body))
	}
	return nil
}

// serveHeartbeats answers heartbeat batches on st until EOF or error.
func (m *Mux) serveHeartbeats(st *yamux.Stream) {
	var rbuf []byte
	for {
		typ, body, err := readFrame(st, &rbuf, m.opts.MaxFrameSize)
		if err != nil {
			return
		}
		out, err := m.answerBatch(typ, body)
		if err != nil {
			_, _ = writeStatus(st, nil, statusError, err.Error())
			return
		}
		if _, err := st.Write(out); err != nil {
			return
		}
		if cap(rbuf) > maxPooledBuf {
			rbuf = nil
		}
		st.Shrink()
	}
}

// answerBatch runs every heartbeat of a batch frame through its group's
// heartbeat handler and encodes the answer frame. A malformed frame is an
// error (the stream closes); a heartbeat for an unknown or closed group is
// answered with that group's error status.
func (m *Mux) answerBatch(typ byte, body []byte) ([]byte, error) {
	if typ != typeHeartbeatBatch {
		return nil, fmt.Errorf("%w: frame type %d on a heartbeat stream", ErrBadFrame, typ)
	}
	n, w := binary.Uvarint(body)
	if w <= 0 || n > hbMaxBatch {
		return nil, fmt.Errorf("%w: heartbeat batch count", ErrBadFrame)
	}
	body = body[w:]
	cs := getCodec()
	defer putCodec(cs)
	out := beginFrame(nil, statusOK)
	out = binary.AppendUvarint(out, n)
	for range n {
		gl, w := binary.Uvarint(body)
		if w <= 0 || gl == 0 || gl > maxNameLen || uint64(len(body)-w) < gl {
			return nil, fmt.Errorf("%w: heartbeat batch group name", ErrBadFrame)
		}
		name := string(body[w : w+int(gl)])
		body = body[w+int(gl):]
		l, ityp, err := parseFrameHeader(body, m.opts.MaxFrameSize)
		if err != nil || len(body) < frameHdrLen+l || ityp != typeAppendEntries {
			return nil, fmt.Errorf("%w: heartbeat batch item", ErrBadFrame)
		}
		item := body[frameHdrLen : frameHdrLen+l]
		body = body[frameHdrLen+l:]
		req := &raft.AppendEntriesRequest{}
		if err := cs.decode(item, req); err != nil {
			return nil, err
		}
		out = m.answerHeartbeat(out, cs, name, req)
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the heartbeat batch", ErrBadFrame, len(body))
	}
	return endFrame(out), nil
}

// answerHeartbeat runs one heartbeat and appends its answer frame to out.
// Each heartbeat gets its own response channel: a late answer of one that
// was given up on (its group closing) must not answer the next.
func (m *Mux) answerHeartbeat(out []byte, cs *codecState, name string, req *raft.AppendEntriesRequest) []byte {
	respCh := make(chan raft.RPCResponse, 1)
	status := func(st byte, msg string) []byte {
		off := len(out)
		out = append(out, 0, 0, 0, 0, st)
		out = append(out, msg...)
		return finishFrame(out, off)
	}
	if !isHeartbeat(req) {
		return status(statusError, "not a heartbeat")
	}
	if msg := m.fencedMessage(req); msg != "" {
		return status(statusFenced, msg)
	}
	t := m.group(name)
	if t == nil {
		return status(statusUnknownGroup, fmt.Sprintf("raft group %q is not registered on %s", name, m.addr))
	}
	rpc := raft.RPC{Command: req, RespChan: respCh}
	if !t.runHeartbeat(rpc) {
		select {
		case t.consumeCh <- rpc:
		case <-t.shutdownCh:
			return status(statusUnknownGroup, fmt.Sprintf("raft group %q closed on %s", name, m.addr))
		case <-m.done:
			return status(statusError, "node closing")
		}
	}
	var resp raft.RPCResponse
	select {
	case resp = <-respCh:
	case <-t.shutdownCh:
		return status(statusUnknownGroup, fmt.Sprintf("raft group %q closed on %s", name, m.addr))
	case <-m.done:
		return status(statusError, "node closing")
	}
	if resp.Error != nil {
		return status(statusError, resp.Error.Error())
	}
	cs.w.b = cs.w.b[:0]
	frame, err := cs.encodeFrame(statusOK, resp.Response)
	if err != nil {
		return status(statusError, err.Error())
	}
	return append(out, frame...)
}
