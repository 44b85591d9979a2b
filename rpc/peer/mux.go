package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/yamux"
)

// Options configures a Mux. The zero value of every field means its default.
type Options struct {
	// Advertise is the address peers use to reach this node; default: the bound listener address.
	Advertise string
	// DialTimeout bounds one TCP dial to a peer. Default 2 s.
	DialTimeout time.Duration
	// RedialMin and RedialMax bound the backoff between failed dials to one peer: after a failure,
	// calls to that peer fail fast until the backoff passes. Defaults 50 ms and 2 s.
	RedialMin, RedialMax time.Duration
	// RPCTimeout bounds one unary Raft RPC (and scales with the size of InstallSnapshot). Default 10 s.
	RPCTimeout time.Duration
	// MaxFrameSize bounds one frame in bytes; larger frames are refused. Default 64 MiB.
	MaxFrameSize int
	// MaxIdleStreams is how many idle streams are kept per (peer, group) for reuse. Default 2.
	MaxIdleStreams int
	// KeepAliveInterval is the yamux ping interval per session. Default 10 s.
	KeepAliveInterval time.Duration
	// AcceptBacklog is the yamux backlog of opened-but-not-accepted streams. Default 4096.
	AcceptBacklog int
	// Logger receives transport logs; default slog.Default().
	Logger *slog.Logger
	// HeartbeatBatchDelay is how long a Raft heartbeat waits for the
	// heartbeats of other groups to the same node, to share one frame.
	// Keep it well below the groups' heartbeat interval (HeartbeatTimeout /
	// 10): raft waits HeartbeatTimeout for contact. Default 10 ms.
	HeartbeatBatchDelay time.Duration
	// NoHeartbeatBatches sends every heartbeat on its group's own stream
	// (as binaries before heartbeat batches did). Tests and benchmarks.
	NoHeartbeatBatches bool
	// TLS, when set, makes every connection of the listener and of its
	// dials mutual TLS (tls.go); connections that are not are refused.
	// Default nil: plain TCP.
	TLS *MutualTLS
	// Fenced says whether raft requests from the server id are refused
	// (status 5, ErrFenced on the sender): the id of a node given up for
	// lost, whose old copies of the groups must not reach this node's.
	// Nil: none is. Called for every raft request; it must be cheap.
	Fenced func(from raft.ServerID) bool
	// OnFenced is called when a remote node refused one of this node's
	// raft requests because it fenced this node, with the remote's
	// address and message. It may be called many times.
	OnFenced func(remote, msg string)
}

func (o *Options) withDefaults() Options {
	c := *o
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.DialTimeout, 2*time.Second)
	def(&c.HeartbeatBatchDelay, defaultHeartbeatBatchDelay)
	def(&c.RedialMin, 50*time.Millisecond)
	def(&c.RedialMax, 2*time.Second)
	def(&c.RPCTimeout, 10*time.Second)
	def(&c.KeepAliveInterval, 10*time.Second)
	if c.MaxFrameSize <= 0 {
		c.MaxFrameSize = DefaultMaxFrameSize
	}
	if c.MaxIdleStreams <= 0 {
		c.MaxIdleStreams = 2
	}
	if c.AcceptBacklog <= 0 {
		c.AcceptBacklog = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// HandlerFunc serves one node-to-node call. req is valid only until the handler returns. ctx is
// cancelled when the Mux closes. A returned error reaches the caller as ErrRemote with its message.
type HandlerFunc func(ctx context.Context, req []byte) ([]byte, error)

// Mux is one node's peer listener plus its outbound yamux sessions. It is safe for concurrent use.
type Mux struct {
	opts   Options
	tlsIn  *tls.Config // nil without Options.TLS
	tlsOut *tls.Config
	ln     net.Listener
	addr   string
	ymcfg  *yamux.Config
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed by Close

	mu       sync.Mutex
	closed   bool
	out      map[string]*remote
	in       map[*yamux.Session]struct{}
	handlers map[string]HandlerFunc

	gmu    sync.RWMutex
	groups map[string]*Transport

	hbMu            sync.Mutex
	hb              map[string]*hbBatcher // heartbeat batches per remote address
	hbCalls         atomic.Int64          // heartbeats sent in batches
	hbFrames        atomic.Int64          // batch frames sent
	hbCached        atomic.Int64          // heartbeats answered from a group's cache
	appendsRepeated atomic.Int64          // idle AppendEntries answered by their pipeline
	fencedRequests  atomic.Int64          // raft requests refused: their sender is fenced

	rejectHeartbeatStreams bool // tests: answer kind-3 streams as a binary without batches does

	wg sync.WaitGroup
}

// remote is the outbound session to one peer address.
type remote struct {
	addr     string
	mu       sync.Mutex // held while dialling
	sess     *yamux.Session
	backoff  time.Duration
	nextDial time.Time
	lastErr  error
	closed   bool
}

// Listen opens the peer listener on addr (use 127.0.0.1:0 in tests) and starts accepting.
func Listen(addr string, opts Options) (*Mux, error) {
	o := opts.withDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("peer: listen on %s: %w", addr, err)
	}
	cfg := yamux.DefaultConfig()
	// yamux v0.1.2 fixes the initial stream window at 256 KiB (not configurable), but a stream's
	// receive buffer is allocated only when data arrives and is released by Shrink on idle
	// streams, so idle streams cost a few hundred bytes. MaxStreamWindowSize stays at the minimum.
	cfg.AcceptBacklog = o.AcceptBacklog
	cfg.EnableKeepAlive = true
	cfg.KeepAliveInterval = o.KeepAliveInterval
	cfg.ConnectionWriteTimeout = o.RPCTimeout
	cfg.StreamOpenTimeout = o.RPCTimeout
	cfg.StreamCloseTimeout = 30 * time.Second
	cfg.LogOutput = nil
	cfg.Logger = slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)
	if err := yamux.VerifyConfig(cfg); err != nil {
		ln.Close()
		return nil, fmt.Errorf("peer: yamux config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mux{
		opts:     o,
		ln:       ln,
		addr:     ln.Addr().String(),
		ymcfg:    cfg,
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		out:      make(map[string]*remote),
		in:       make(map[*yamux.Session]struct{}),
		handlers: make(map[string]HandlerFunc),
		groups:   make(map[string]*Transport),
		hb:       make(map[string]*hbBatcher),
	}
	if o.TLS != nil {
		m.tlsIn, m.tlsOut = o.TLS.serverConfig(), o.TLS.clientConfig()
	}
	if o.Advertise != "" {
		m.addr = o.Advertise
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Addr is the address peers dial to reach this node (Options.Advertise or the bound address).
func (m *Mux) Addr() string { return m.addr }

// Handle registers h for calls named name, replacing any previous handler.
func (m *Mux) Handle(name string, h HandlerFunc) {
	m.mu.Lock()
	m.handlers[name] = h
	m.mu.Unlock()
}

// Close stops the listener, closes every session and stream, and waits for the Mux's goroutines.
// Group transports obtained from Transport stop working (their RPCs return ErrClosed).
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	m.cancel()
	outs := make([]*remote, 0, len(m.out))
	for _, r := range m.out {
		outs = append(outs, r)
	}
	ins := make([]*yamux.Session, 0, len(m.in))
	for s := range m.in {
		ins = append(ins, s)
	}
	m.mu.Unlock()

	err := m.ln.Close()
	for _, r := range outs {
		r.mu.Lock()
		r.closed = true
		if r.sess != nil {
			r.sess.Close()
		}
		r.mu.Unlock()
	}
	for _, s := range ins {
		s.Close()
	}
	m.gmu.Lock()
	gs := make([]*Transport, 0, len(m.groups))
	for _, t := range m.groups {
		gs = append(gs, t)
	}
	m.gmu.Unlock()
	for _, t := range gs {
		t.Close()
	}
	m.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (m *Mux) isClosed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if m.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			m.opts.Logger.Warn("peer: accept failed", "addr", m.addr, "err", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			conn.Close()
			return
		}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.admit(conn)
	}
}

// admit starts a yamux session on an accepted connection once its first
// byte is a yamux frame's (version 0). Anything else (a gossip probe of a
// node asking whether this is a gossip address, a port scanner, a client
// of another protocol) is closed at once with a debug log, so yamux never
// logs its bytes as a protocol error; a connection that sends nothing is
// closed after RPCTimeout. It runs on its own goroutine: a slow client
// must not hold up the accept loop.
func (m *Mux) admit(conn net.Conn) {
	defer m.wg.Done()
	var first [1]byte
	conn.SetReadDeadline(time.Now().Add(m.opts.RPCTimeout))
	_, err := io.ReadFull(conn, first[:])
	conn.SetReadDeadline(time.Time{})
	want := byte(yamuxVersion)
	if m.tlsIn != nil {
		want = tlsHandshake
	}
	if err != nil || first[0] != want {
		m.opts.Logger.Debug("peer: closed a connection that is no fluss-node peer", "remote", conn.RemoteAddr(), "first_byte", first[0], "tls", m.tlsIn != nil, "err", err)
		conn.Close()
		return
	}
	var c net.Conn = &peekedConn{Conn: conn, first: first[:]}
	if m.tlsIn != nil {
		tc := tls.Server(c, m.tlsIn)
		if err := handshake(m.ctx, tc, m.opts.RPCTimeout); err != nil {
			m.opts.Logger.Warn("peer: refused a connection", "remote", conn.RemoteAddr(), "err", err)
			conn.Close()
			return
		}
		c = tc
	}
	sess, err := yamux.Server(newSendConn(c), m.ymcfg)
	if err != nil {
		conn.Close()
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		sess.Close()
		return
	}
	m.in[sess] = struct{}{}
	m.wg.Add(1)
	m.mu.Unlock()
	go m.serveSession(sess)
}

// handshake runs a TLS handshake bounded by timeout.
func handshake(ctx context.Context, tc *tls.Conn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	return nil
}

// peekedConn is a connection whose first bytes were read already: Read
// returns them before reading on.
type peekedConn struct {
	net.Conn
	first []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (m *Mux) serveSession(sess *yamux.Session) {
	defer m.wg.Done()
	defer func() {
		sess.Close()
		m.mu.Lock()
		delete(m.in, sess)
		m.mu.Unlock()
	}()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			st.Close()
			return
		}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.serveStream(st)
	}
}

// session returns the live outbound session to addr, dialling it if needed. After a failed dial
// further calls fail fast with the last error until the backoff has passed.
func (m *Mux) session(addr string) (*yamux.Session, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	r := m.out[addr]
	if r == nil {
		r = &remote{addr: addr}
		m.out[addr] = r
	}
	m.mu.Unlock()

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	if r.sess != nil && !r.sess.IsClosed() {
		return r.sess, nil
	}
	if r.sess != nil {
		r.sess = nil
	}
	now := time.Now()
	if now.Before(r.nextDial) {
		return nil, fmt.Errorf("peer: %s unreachable (retrying in %v): %w", addr, r.nextDial.Sub(now).Round(time.Millisecond), r.lastErr)
	}
	d := net.Dialer{Timeout: m.opts.DialTimeout}
	conn, err := d.DialContext(m.ctx, "tcp", addr)
	if err == nil && m.tlsOut != nil {
		tc := tls.Client(conn, m.tlsOut)
		if err = handshake(m.ctx, tc, m.opts.DialTimeout); err != nil {
			conn.Close()
		} else {
			conn = tc
		}
	}
	if err == nil {
		var sess *yamux.Session
		sess, err = yamux.Client(newSendConn(conn), m.ymcfg)
		if err == nil {
			r.sess, r.backoff, r.lastErr = sess, 0, nil
			return sess, nil
		}
		conn.Close()
	}
	if m.isClosed() {
		return nil, ErrClosed
	}
	r.backoff = min(max(2*r.backoff, m.opts.RedialMin), m.opts.RedialMax)
	r.nextDial = time.Now().Add(r.backoff)
	r.lastErr = err
	return nil, fmt.Errorf("peer: dial %s: %w", addr, err)
}

// Ping round-trips a yamux ping on the session to addr, dialling it if
// needed: whether the node there answers (its accept and receive loops
// run). It waits at most the session's write timeout.
func (m *Mux) Ping(addr string) (time.Duration, error) {
	sess, err := m.session(addr)
	if err != nil {
		return 0, err
	}
	return sess.Ping()
}

// openStream opens a stream to addr. The caller writes the stream header with its first frame.
func (m *Mux) openStream(addr string) (*yamux.Stream, error) {
	sess, err := m.session(addr)
	if err != nil {
		return nil, err
	}
	st, err := sess.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("peer: open stream to %s: %w", addr, err)
	}
	return st, nil
}

// abort closes a stream and wakes any goroutine blocked reading or writing it.
func abort(st *yamux.Stream) {
	past := time.Unix(1, 0)
	st.SetDeadline(past)
	st.Close()
}

// Call sends req to the handler registered as name on the node at addr and returns its reply.
// It returns ctx.Err() (wrapped) when ctx ends first; ErrUnknownHandler when the remote has no
// such handler; ErrRemote with the handler's message when the handler failed.
func (m *Mux) Call(ctx context.Context, addr, name string, req []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("peer: call %s on %s: %w", name, addr, err)
	}
	if len(req)+1 > m.opts.MaxFrameSize {
		return nil, fmt.Errorf("peer: call %s: %w: request of %d bytes exceeds MaxFrameSize %d", name, ErrBadFrame, len(req), m.opts.MaxFrameSize)
	}
	buf, err := appendHeader(make([]byte, 0, headerFixedLen+len(name)+frameHdrLen+len(req)), kindCall, name)
	if err != nil {
		return nil, err
	}
	st, err := m.openStream(addr)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { abort(st) })
	defer stop()
	off := len(buf)
	buf = append(buf, 0, 0, 0, 0, typeCall)
	buf = append(buf, req...)
	finishFrame(buf, off)
	if _, err := st.Write(buf); err != nil {
		return nil, m.callErr(ctx, name, addr, err)
	}
	var rbuf []byte
	status, body, err := readFrame(st, &rbuf, m.opts.MaxFrameSize)
	if err != nil {
		return nil, m.callErr(ctx, name, addr, err)
	}
	if status != statusOK {
		return nil, fmt.Errorf("peer: call %s on %s: %w", name, addr, errorForStatus(status, body))
	}
	return body, nil
}

func (m *Mux) callErr(ctx context.Context, name, addr string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("peer: call %s on %s: %w", name, addr, cerr)
	}
	if m.isClosed() {
		return fmt.Errorf("peer: call %s on %s: %w", name, addr, ErrClosed)
	}
	return fmt.Errorf("peer: call %s on %s: %w", name, addr, err)
}

// serveStream handles one accepted stream until EOF or error.
func (m *Mux) serveStream(st *yamux.Stream) {
	defer m.wg.Done()
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(m.opts.RPCTimeout))
	h, err := readHeader(st)
	if err != nil {
		if h.version != 0 { // magic matched: the peer speaks our protocol, tell it why
			writeStatus(st, nil, statusBadHeader, err.Error())
		}
		m.opts.Logger.Debug("peer: bad stream header", "err", err)
		return
	}
	st.SetReadDeadline(time.Time{})
	switch h.kind {
	case kindRaft:
		m.serveRaft(st, h.name)
	case kindCall:
		m.serveCall(st, h.name)
	case kindHeartbeats:
		if m.rejectHeartbeatStreams {
			writeStatus(st, nil, statusBadHeader, "unknown stream kind 3")
			return
		}
		m.serveHeartbeats(st)
	}
}

func writeStatus(w io.Writer, buf []byte, status byte, msg string) ([]byte, error) {
	buf = beginFrame(buf, status)
	buf = append(buf, msg...)
	_, err := w.Write(endFrame(buf))
	return buf, err
}

func (m *Mux) serveCall(st *yamux.Stream, name string) {
	var rbuf, wbuf []byte
	for {
		typ, body, err := readFrame(st, &rbuf, m.opts.MaxFrameSize)
		if err != nil {
			if !errors.Is(err, io.EOF) && !m.isClosed() {
				m.opts.Logger.Debug("peer: call stream", "name", name, "err", err)
			}
			return
		}
		m.mu.Lock()
		h := m.handlers[name]
		m.mu.Unlock()
		switch {
		case typ != typeCall:
			wbuf, err = writeStatus(st, wbuf, statusError, fmt.Sprintf("peer: frame type %d on a call stream", typ))
		case h == nil:
			wbuf, err = writeStatus(st, wbuf, statusUnknownHandler, fmt.Sprintf("no handler %q on %s", name, m.addr))
		default:
			resp, herr := m.runHandler(h, body)
			if herr != nil {
				wbuf, err = writeStatus(st, wbuf, statusError, herr.Error())
			} else if len(resp)+1 > m.opts.MaxFrameSize {
				wbuf, err = writeStatus(st, wbuf, statusError, fmt.Sprintf("reply of %d bytes exceeds MaxFrameSize", len(resp)))
			} else {
				wbuf = beginFrame(wbuf, statusOK)
				wbuf = append(wbuf, resp...)
				_, err = st.Write(endFrame(wbuf))
			}
		}
		if err != nil {
			return
		}
		st.Shrink()
	}
}

// runHandler calls h and turns a panic into an error: request paths never panic.
func (m *Mux) runHandler(h HandlerFunc, req []byte) (resp []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
			m.opts.Logger.Error("peer: handler panic", "panic", r)
		}
	}()
	return h(m.ctx, req)
}
