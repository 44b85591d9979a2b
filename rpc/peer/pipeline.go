package peer

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/yamux"
)

// maxPipelineInflight bounds the AppendEntries requests written but not yet answered on one
// pipeline (raft's NetworkTransport uses the same bound).
const maxPipelineInflight = 128

// AppendEntriesPipeline implements raft.Transport: it opens a dedicated stream to target on
// which requests are written back to back and answers are read in order by one goroutine.
func (t *Transport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("peer: group %s: %w", t.group, ErrClosed)
	}
	st, err := t.m.openStream(string(target))
	if err != nil {
		return nil, fmt.Errorf("peer: group %s: pipeline: %w", t.group, err)
	}
	p := &pipeline{
		t:        t,
		target:   target,
		st:       st,
		cs:       getCodec(),
		fresh:    true,
		inflight: make(chan *appendFuture, maxPipelineInflight),
		doneCh:   make(chan raft.AppendFuture, maxPipelineInflight),
		stop:     make(chan struct{}),
	}
	t.m.mu.Lock()
	if t.m.closed {
		t.m.mu.Unlock()
		abort(st)
		return nil, ErrClosed
	}
	t.m.wg.Add(1)
	t.m.mu.Unlock()
	go p.decodeLoop()
	return p, nil
}

type pipeline struct {
	t      *Transport
	target raft.ServerAddress
	st     *yamux.Stream

	wmu   sync.Mutex // serialises writers; guards cs and fresh
	cs    *codecState
	fresh bool

	inflight chan *appendFuture
	doneCh   chan raft.AppendFuture
	stop     chan struct{}
	once     sync.Once

	// Idle repeats (hbcache.go), guarded by amu: the key and sequence
	// number of the last request written, and its answer once accepted.
	amu      sync.Mutex
	seq      uint64
	last     appendKey
	lastOK   bool
	lastResp raft.AppendEntriesResponse
}

// appendKey is what an AppendEntries without entries tells a follower.
type appendKey struct{ term, prevIndex, prevTerm, commit uint64 }

func keyOf(a *raft.AppendEntriesRequest) appendKey {
	return appendKey{a.Term, a.PrevLogEntry, a.PrevLogTerm, a.LeaderCommitIndex}
}

// repeat returns the answer to args when args repeats the last request
// written, which was accepted, and the follower was heard from lately.
func (p *pipeline) repeat(args *raft.AppendEntriesRequest) (raft.AppendEntriesResponse, bool) {
	if len(args.Entries) > 0 || p.st.Session().IsClosed() {
		return raft.AppendEntriesResponse{}, false
	}
	p.amu.Lock()
	ok := p.lastOK && p.last == keyOf(args)
	resp := p.lastResp
	p.amu.Unlock()
	if !ok {
		return raft.AppendEntriesResponse{}, false
	}
	if _, fresh := p.t.hbc.fresh(p.target, args.Term, 2); !fresh {
		return raft.AppendEntriesResponse{}, false
	}
	return resp, true
}

// answered records the answer to the request written as number seq.
func (p *pipeline) answered(f *appendFuture) {
	p.amu.Lock()
	defer p.amu.Unlock()
	if f.seq == p.seq && f.resp.Success && f.resp.Term == f.args.Term {
		p.lastOK, p.lastResp = true, *f.resp
	}
}

// AppendEntries implements raft.AppendPipeline. A request larger than a
// frame goes out as consecutive parts (fit.go); raft gets one future, for
// the whole request, answered with the last part's answer.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	s := p.t.prog.sending()
	f := &appendFuture{start: s.at, sent: s, args: args, resp: resp, done: make(chan struct{})}
	if r, ok := p.repeat(args); ok {
		// Answered in order by decodeLoop, without a frame.
		*resp, f.local = r, true
		p.t.m.appendsRepeated.Add(1)
		return p.enqueue(f)
	}
	parts := splitAppend(args, p.t.m.opts.MaxFrameSize)
	p.wmu.Lock()
	var err error
	for i, part := range parts { // each written as it is encoded: parts may add up to far more than a frame
		p.cs.w.b = p.cs.w.b[:0]
		if p.fresh {
			p.cs.w.b, _ = appendHeader(p.cs.w.b, kindRaft, p.t.group)
			p.fresh = false
		}
		off := len(p.cs.w.b)
		var buf []byte
		if buf, err = p.cs.encodeFrame(typeAppendEntries, part); err != nil {
			break
		}
		if n := len(buf) - off; n > p.t.m.opts.MaxFrameSize+frameHdrLen {
			err = fmt.Errorf("%w: request of %d bytes exceeds MaxFrameSize", ErrBadFrame, n)
			break
		}
		if i == len(parts)-1 {
			p.amu.Lock()
			p.seq++
			f.seq, p.last, p.lastOK = p.seq, keyOf(args), false
			p.amu.Unlock()
		}
		p.st.SetWriteDeadline(time.Now().Add(p.t.m.opts.RPCTimeout))
		if _, err = p.st.Write(buf); err != nil {
			break
		}
	}
	if cap(p.cs.w.b) > maxPooledBuf {
		p.cs.w.b = nil
	}
	p.wmu.Unlock()
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("peer: group %s: pipeline to %s: %w", p.t.group, p.target, err)
	}
	for _, part := range parts[:len(parts)-1] {
		pf := &appendFuture{start: f.start, args: part, resp: new(raft.AppendEntriesResponse), done: make(chan struct{}), whole: f}
		if _, err := p.enqueue(pf); err != nil {
			return nil, err
		}
	}
	return p.enqueue(f)
}

func (p *pipeline) enqueue(f *appendFuture) (raft.AppendFuture, error) {
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	}
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.doneCh }

// Close implements raft.AppendPipeline; in-flight futures are abandoned.
func (p *pipeline) Close() error {
	p.once.Do(func() {
		close(p.stop)
		abort(p.st)
	})
	return nil
}

func (p *pipeline) decodeLoop() {
	defer p.t.m.wg.Done()
	defer p.Close()
	cs := getCodec()
	defer putCodec(cs)
	for {
		var f *appendFuture
		select {
		case f = <-p.inflight:
		case <-p.stop:
			return
		case <-p.t.m.done:
			return
		}
		var err error
		if !f.local {
			var status byte
			var body []byte
			status, body, err = readFrame(p.st, &cs.rbuf, p.t.m.opts.MaxFrameSize)
			if err == nil && status != statusOK {
				err = p.t.m.remoteErr(string(p.target), status, body)
			}
			if err == nil {
				err = cs.decode(body, f.resp)
			}
			if err != nil {
				err = fmt.Errorf("peer: group %s: pipeline to %s: %w", p.t.group, p.target, err)
			} else {
				p.answered(f)
			}
			if f.whole == nil {
				p.t.prog.answered(p.target, f.sent, f.resp, err)
			}
		}
		f.respond(err)
		if f.whole != nil { // a part: raft waits for the whole request
			if err == nil {
				continue
			}
			f = f.whole
			f.respond(err)
		}
		select {
		case p.doneCh <- f:
		case <-p.stop:
			return
		case <-p.t.m.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// appendFuture implements raft.AppendFuture.
type appendFuture struct {
	seq   uint64        // number of the written request; 0 for a local answer
	local bool          // answered from the pipeline's last accepted request
	whole *appendFuture // set on a part of a split request: the future raft holds
	start time.Time
	sent  sent // for the follower's progress (progress.go)
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	done  chan struct{}
	err   error
}

func (f *appendFuture) respond(err error) {
	f.err = err
	close(f.done)
}

// Error implements raft.Future: it blocks until the answer arrived or the pipeline failed.
func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

// Start implements raft.AppendFuture.
func (f *appendFuture) Start() time.Time { return f.start }

// Request implements raft.AppendFuture.
func (f *appendFuture) Request() *raft.AppendEntriesRequest { return f.args }

// Response implements raft.AppendFuture.
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }
