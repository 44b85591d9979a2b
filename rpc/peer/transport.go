package peer

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/yamux"
)

// Transport is the raft.Transport of one Raft group on a Mux. raft.ServerAddress values are the
// peer addresses of remote Muxes (Mux.Addr). It also implements raft.WithClose and
// raft.WithPreVote. Close unregisters the group; the Mux stays open.
type Transport struct {
	m          *Mux
	group      string
	consumeCh  chan raft.RPC
	shutdownCh chan struct{}

	// hbMu guards hbFn; runHeartbeat holds it read-locked while the
	// handler runs, so Close waits for running handlers.
	hbMu sync.RWMutex
	hbFn func(raft.RPC) // nil once closed

	admitTN atomic.Pointer[func() error] // GateTimeoutNow; nil admits all
	admitW  atomic.Pointer[func() error] // GateWrites; nil admits all

	ackCheck atomic.Pointer[func(*raft.AppendEntriesRequest) error] // GateAppendAck; nil: none

	hbc  hbCache         // hbcache.go
	prog progressTracker // progress.go

	mu     sync.Mutex
	closed bool
	idle   map[raft.ServerAddress][]*yamux.Stream
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

// Transport registers the Raft group and returns its transport. The group id (1..255 bytes)
// travels in the stream header; a remote Mux without the group answers ErrUnknownGroup.
func (m *Mux) Transport(group string) (*Transport, error) {
	if len(group) == 0 || len(group) > maxNameLen {
		return nil, fmt.Errorf("peer: group id %q: length must be 1..%d bytes", group, maxNameLen)
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	t := &Transport{
		m:          m,
		group:      group,
		consumeCh:  make(chan raft.RPC),
		shutdownCh: make(chan struct{}),
		idle:       make(map[raft.ServerAddress][]*yamux.Stream),
	}
	m.gmu.Lock()
	defer m.gmu.Unlock()
	if _, ok := m.groups[group]; ok {
		return nil, fmt.Errorf("peer: group %q: %w", group, ErrGroupExists)
	}
	m.groups[group] = t
	return t, nil
}

func (m *Mux) group(name string) *Transport {
	m.gmu.RLock()
	t := m.groups[name]
	m.gmu.RUnlock()
	return t
}

// Consumer implements raft.Transport.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consumeCh }

// LocalAddr implements raft.Transport: the Mux's address.
func (t *Transport) LocalAddr() raft.ServerAddress { return raft.ServerAddress(t.m.Addr()) }

// EncodePeer implements raft.Transport.
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// DecodePeer implements raft.Transport.
func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// SetHeartbeatHandler implements raft.Transport: heartbeats skip the Consumer channel.
func (t *Transport) SetHeartbeatHandler(cb func(rpc raft.RPC)) {
	t.hbMu.Lock()
	t.hbFn = cb
	t.hbMu.Unlock()
}

// runHeartbeat runs rpc through the handler raft set with
// SetHeartbeatHandler and reports whether there was one (none before it is
// set and after Close). The handler runs on the transport's goroutine,
// outside raft's own: Close waits for it, so that raft, shut down, never
// has a heartbeat write its term to a store closed after the shutdown.
func (t *Transport) runHeartbeat(rpc raft.RPC) bool {
	t.hbMu.RLock()
	defer t.hbMu.RUnlock()
	if t.hbFn == nil {
		return false
	}
	t.hbFn(rpc)
	return true
}

// GateTimeoutNow makes the group admit an incoming TimeoutNow request
// (the start of a leadership transfer to this server) only when admit
// returns nil; otherwise the sender gets admit's error and raft never sees
// the request. nil admits all (the default).
//
// Why: hashicorp/raft acts on TimeoutNow only in the follower state. A
// candidate that receives one starts no election; it only marks its
// current candidacy as a transferred one, which then ignores the current
// leader's heartbeats until its election timer fires. A leader that keeps
// retrying the transfer (a draining node does) can keep such a replica a
// candidate for as long as it retries: it neither becomes leader nor
// follows. Refused,
// the transfer fails at once, the candidate steps back to follower on the
// next heartbeat, and the next attempt finds a follower.
func (t *Transport) GateTimeoutNow(admit func() error) {
	if admit == nil {
		t.admitTN.Store(nil)
		return
	}
	t.admitTN.Store(&admit)
}

// admitTimeoutNow applies the GateTimeoutNow check.
func (t *Transport) admitTimeoutNow() error {
	if admit := t.admitTN.Load(); admit != nil {
		return (*admit)()
	}
	return nil
}

// GateWrites makes the group admit incoming requests that would store new
// data only when admit returns nil: AppendEntries carrying at least one
// command entry, and InstallSnapshot. Otherwise the sender gets admit's
// error and raft never sees the request (a snapshot's data is read and
// dropped). Heartbeats, votes and entries without commands
// (configuration changes, a new leader's no-op) always pass. nil admits
// all (the default).
//
// Why: a follower whose disk is nearly full refuses new data rather than
// store it into a full disk (node/diskspace.go): it falls behind, and
// catches up once space is back; configuration changes still reach it, so
// that its group can move it elsewhere.
func (t *Transport) GateWrites(admit func() error) {
	if admit == nil {
		t.admitW.Store(nil)
		return
	}
	t.admitW.Store(&admit)
}

// admitWrites applies the GateWrites check to cmd.
func (t *Transport) admitWrites(cmd any) error {
	admit := t.admitW.Load()
	if admit == nil {
		return nil
	}
	switch c := cmd.(type) {
	case *raft.InstallSnapshotRequest:
	case *raft.AppendEntriesRequest:
		if !slices.ContainsFunc(c.Entries, func(e *raft.Log) bool { return e.Type == raft.LogCommand }) {
			return nil
		}
	default:
		return nil
	}
	return (*admit)()
}

// GateAppendAck makes the group run check before it answers an
// AppendEntries request that raft accepted (not a heartbeat): the answer
// waits for check, and when check fails the sender gets its error instead
// of the acknowledgement. nil removes the check (the default).
//
// Why: an acknowledgement tells the leader that this server holds the
// request's entries durably, and raft may count them committed on it. A
// replica whose log defers syncs (node/replica durable.go) may have found
// the entries already stored, written but not yet synced, and raft answers
// without asking the log; check waits for that sync.
func (t *Transport) GateAppendAck(check func(req *raft.AppendEntriesRequest) error) {
	if check == nil {
		t.ackCheck.Store(nil)
		return
	}
	t.ackCheck.Store(&check)
}

// checkAppendAck applies the GateAppendAck check to a successful answer
// to req.
func (t *Transport) checkAppendAck(req *raft.AppendEntriesRequest, resp any) error {
	check := t.ackCheck.Load()
	if check == nil {
		return nil
	}
	if r, ok := resp.(*raft.AppendEntriesResponse); !ok || !r.Success {
		return nil
	}
	return (*check)(req)
}

// Close implements raft.WithClose: it unregisters the group and drops its idle streams.
func (t *Transport) Close() error {
	t.m.gmu.Lock()
	if t.m.groups[t.group] == t {
		delete(t.m.groups, t.group)
	}
	t.m.gmu.Unlock()
	t.hbMu.Lock() // waits for running heartbeat handlers
	t.hbFn = nil
	t.hbMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	close(t.shutdownCh)
	for _, sts := range t.idle {
		for _, st := range sts {
			st.Close()
		}
	}
	t.idle = nil
	return nil
}

// AppendEntries implements raft.Transport. A heartbeat is answered from the
// group's heartbeat cache when it may (hbcache.go), else sent in a batch
// shared by every group (heartbeat.go).
func (t *Transport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	s := t.prog.sending()
	if !isHeartbeat(args) {
		var err error
		for _, part := range splitAppend(args, t.m.opts.MaxFrameSize) {
			if err = t.unary(target, typeAppendEntries, part, resp, nil, 0); err != nil || !resp.Success {
				break // a refused part: the follower refuses the rest too (fit.go)
			}
		}
		t.prog.answered(target, s, resp, err)
		return err
	}
	if t.hbc.answer(target, args, resp) {
		t.m.hbCached.Add(1)
		return nil
	}
	return t.heartbeat(target, s, args, resp, false)
}

// heartbeat sends a heartbeat noted as s past the cache and records its
// answer in the cache and in the follower's progress.
func (t *Transport) heartbeat(target raft.ServerAddress, s sent, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, urgent bool) error {
	err := t.sendHeartbeat(target, args, resp, urgent)
	t.hbc.note(target, args, resp, s.at, err)
	t.prog.answered(target, s, resp, err)
	return err
}

// sendHeartbeat sends one heartbeat: in a batch, or on the group's own
// stream when the remote does not accept batches.
func (t *Transport) sendHeartbeat(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, urgent bool) error {
	if !t.m.opts.NoHeartbeatBatches {
		err := t.m.heartbeat(string(target), t.group, args, resp, urgent)
		if !errors.Is(err, errNoBatches) {
			return err
		}
	}
	return t.unary(target, typeAppendEntries, args, resp, nil, 0)
}

// RequestVote implements raft.Transport.
func (t *Transport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.unary(target, typeRequestVote, args, resp, nil, 0)
}

// RequestPreVote implements raft.WithPreVote.
func (t *Transport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.unary(target, typeRequestPreVote, args, resp, nil, 0)
}

// TimeoutNow implements raft.Transport.
func (t *Transport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.unary(target, typeTimeoutNow, args, resp, nil, 0)
}

// InstallSnapshot implements raft.Transport: the request frame is followed on the same stream by
// exactly args.Size bytes of data; the stream is not reused afterwards.
func (t *Transport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.unary(target, typeInstallSnapshot, args, resp, data, args.Size)
}

// getStream returns an idle stream to target or opens a new one; fresh reports whether the
// stream header still has to be written.
func (t *Transport) getStream(target raft.ServerAddress) (st *yamux.Stream, fresh bool, err error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, false, ErrClosed
	}
	sts := t.idle[target]
	for len(sts) > 0 {
		st = sts[len(sts)-1]
		sts = sts[:len(sts)-1]
		if !st.Session().IsClosed() {
			break
		}
		st = nil
	}
	t.idle[target] = sts
	t.mu.Unlock()
	if st != nil {
		return st, false, nil
	}
	st, err = t.m.openStream(string(target))
	return st, true, err
}

func (t *Transport) putStream(target raft.ServerAddress, st *yamux.Stream) {
	st.Shrink()
	t.mu.Lock()
	if !t.closed && len(t.idle[target]) < t.m.opts.MaxIdleStreams {
		t.idle[target] = append(t.idle[target], st)
		st = nil
	}
	t.mu.Unlock()
	if st != nil {
		st.Close()
	}
}

// unary runs one request/response RPC; for InstallSnapshot, size bytes of data follow the request.
func (t *Transport) unary(target raft.ServerAddress, typ byte, args, resp any, data io.Reader, size int64) (err error) {
	st, fresh, err := t.getStream(target)
	if err != nil {
		return fmt.Errorf("peer: group %s: %w", t.group, err)
	}
	reuse := false
	defer func() {
		if reuse {
			t.putStream(target, st)
		} else {
			abort(st)
		}
		if err != nil && t.m.isClosed() {
			err = fmt.Errorf("peer: group %s: %w", t.group, ErrClosed)
		}
	}()
	timeout := t.m.opts.RPCTimeout
	if typ == typeInstallSnapshot {
		// As raft's NetworkTransport: allow one RPCTimeout per 256 KiB of snapshot.
		timeout = max(timeout, timeout*time.Duration(size/(256<<10)))
	}
	st.SetDeadline(time.Now().Add(timeout))

	cs := getCodec()
	defer putCodec(cs)
	cs.w.b = cs.w.b[:0]
	if fresh {
		cs.w.b, _ = appendHeader(cs.w.b, kindRaft, t.group)
	}
	buf, err := cs.encodeFrame(typ, args)
	if err != nil {
		return err
	}
	if len(buf) > t.m.opts.MaxFrameSize+headerFixedLen+maxNameLen+4 {
		return fmt.Errorf("peer: group %s: %w: request of %d bytes exceeds MaxFrameSize", t.group, ErrBadFrame, len(buf))
	}
	if _, err := st.Write(buf); err != nil {
		return fmt.Errorf("peer: group %s: send to %s: %w", t.group, target, err)
	}
	if data != nil {
		n, err := io.Copy(st, io.LimitReader(data, size))
		if err != nil {
			return fmt.Errorf("peer: group %s: send snapshot to %s: %w", t.group, target, err)
		}
		if n != size {
			return fmt.Errorf("peer: group %s: snapshot data ended after %d of %d bytes", t.group, n, size)
		}
	}
	status, body, err := readFrame(st, &cs.rbuf, t.m.opts.MaxFrameSize)
	if err != nil {
		return fmt.Errorf("peer: group %s: response from %s: %w", t.group, target, err)
	}
	if status != statusOK {
		// The stream is still in sync after an error response, except after a snapshot.
		reuse = data == nil
		return fmt.Errorf("peer: group %s on %s: %w", t.group, target, t.m.remoteErr(string(target), status, body))
	}
	if err := cs.decode(body, resp); err != nil {
		return fmt.Errorf("peer: group %s: response from %s: %w", t.group, target, err)
	}
	st.SetDeadline(time.Time{})
	reuse = data == nil
	return nil
}

// serveRaft answers raft RPCs of group name arriving on st until EOF or error. The group is
// looked up per request, so a group registered after the stream opened is served.
func (m *Mux) serveRaft(st *yamux.Stream, name string) {
	respCh := make(chan raft.RPCResponse, 1)
	var rbuf []byte
	for {
		typ, body, err := readFrame(st, &rbuf, m.opts.MaxFrameSize)
		if err != nil {
			if !errors.Is(err, io.EOF) && !m.isClosed() {
				m.opts.Logger.Debug("peer: raft stream", "group", name, "err", err)
			}
			return
		}
		if !m.serveRaftRPC(st, name, typ, body, respCh) {
			return
		}
		if cap(rbuf) > maxPooledBuf {
			rbuf = nil
		}
		st.Shrink()
	}
}

// serveRaftRPC handles one request; it reports whether the stream may carry further requests.
func (m *Mux) serveRaftRPC(st *yamux.Stream, name string, typ byte, body []byte, respCh chan raft.RPCResponse) bool {
	cs := getCodec()
	defer putCodec(cs)
	cmd, err := cs.decodeRequest(typ, body)
	if err != nil {
		_, _ = writeStatus(st, cs.w.b, statusError, err.Error())
		return false // cannot know what follows (snapshot data?)
	}
	var data io.Reader
	snap, isSnap := cmd.(*raft.InstallSnapshotRequest)
	if isSnap {
		if snap.Size < 0 {
			_, _ = writeStatus(st, cs.w.b, statusError, "negative snapshot size")
			return false
		}
		data = io.LimitReader(st, snap.Size)
	}
	if msg := m.fencedMessage(cmd); msg != "" {
		if isSnap {
			_, _ = io.Copy(io.Discard, data)
		}
		_, err := writeStatus(st, cs.w.b, statusFenced, msg)
		return err == nil
	}
	t := m.group(name)
	if t == nil {
		msg := fmt.Sprintf("raft group %q is not registered on %s", name, m.addr)
		if isSnap {
			_, _ = io.Copy(io.Discard, data)
		}
		_, err := writeStatus(st, cs.w.b, statusUnknownGroup, msg)
		return err == nil
	}
	admit := t.admitWrites(cmd)
	if _, ok := cmd.(*raft.TimeoutNowRequest); ok {
		admit = t.admitTimeoutNow()
	}
	if admit != nil {
		if isSnap {
			_, _ = io.Copy(io.Discard, data) // yamux cannot refuse the rest of a stream
		}
		_, err := writeStatus(st, cs.w.b, statusError, admit.Error())
		return err == nil
	}
	rpc := raft.RPC{Command: cmd, Reader: data, RespChan: respCh}
	handled := false
	if ae, ok := cmd.(*raft.AppendEntriesRequest); ok && isHeartbeat(ae) {
		handled = t.runHeartbeat(rpc)
	}
	if !handled {
		select {
		case t.consumeCh <- rpc:
		case <-t.shutdownCh:
			_, _ = writeStatus(st, cs.w.b, statusUnknownGroup, fmt.Sprintf("raft group %q closed on %s", name, m.addr))
			return false
		case <-m.done:
			return false
		}
	}
	var resp raft.RPCResponse
	select {
	case resp = <-respCh:
	case <-t.shutdownCh:
		_, _ = writeStatus(st, cs.w.b, statusUnknownGroup, fmt.Sprintf("raft group %q closed on %s", name, m.addr))
		return false
	case <-m.done:
		return false
	}
	if ae, ok := cmd.(*raft.AppendEntriesRequest); ok && !handled && resp.Error == nil {
		resp.Error = t.checkAppendAck(ae, resp.Response)
	}
	if resp.Error != nil {
		_, err = writeStatus(st, cs.w.b, statusError, resp.Error.Error())
		return err == nil && !isSnap
	}
	cs.w.b = cs.w.b[:0]
	buf, err := cs.encodeFrame(statusOK, resp.Response)
	if err != nil {
		_, _ = writeStatus(st, cs.w.b[:0], statusError, err.Error())
		return false
	}
	if _, err := st.Write(buf); err != nil {
		return false
	}
	return !isSnap
}
