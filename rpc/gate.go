package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"

	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
)

// gateMinBytes: requests smaller than this pass the gate without being
// counted. They cannot hold much memory each, and the write path of small
// requests (the most frequent) stays free of a shared lock.
const gateMinBytes = 64 << 10

// requestGate bounds the bytes of large requests the node works on at once
// (limits.max_inflight_request_bytes). Turning a request into batches takes
// many times its size: a JSON body becomes Arrow column buffers and an
// encoded batch (~8x the body at the peak, with the garbage the collector
// has not freed yet, though large row sets are parsed one row at a time),
// so a handful of concurrent 64 MiB JSON requests would take gigabytes. A
// large request therefore waits here, in arrival order, until the requests
// before it have answered; a request larger than the whole budget goes
// through alone. Waiting ends with the request's context (its deadline, or
// the client going away).
//
// A request enters once, as early as its size is known: a unary Connect
// request over HTTP/1.1 with an uncompressed body of declared length before
// its body is read (gateBody), any other after its message is decoded
// (gateInterceptor), so that requests waiting for their turn hold no
// memory when they can.
type requestGate struct {
	sem     *semaphore.Weighted
	limit   int64
	held    atomic.Int64 // bytes of the requests inside, for the metric
	waiting atomic.Int64 // requests waiting to enter, for the metric
}

func newRequestGate(limit int64) *requestGate {
	return &requestGate{sem: semaphore.NewWeighted(limit), limit: limit}
}

// enter waits until a request of n bytes may go on and returns the
// function that lets it out. Small requests do not wait.
func (g *requestGate) enter(ctx context.Context, n int) (leave func(), err error) {
	if g == nil || n < gateMinBytes {
		return func() {}, nil
	}
	w := min(int64(n), g.limit)
	g.waiting.Add(1)
	err = g.sem.Acquire(ctx, w)
	g.waiting.Add(-1)
	if err != nil {
		return nil, fmt.Errorf("waiting for other large requests to finish (limits.max_inflight_request_bytes = %d): %w", g.limit, err)
	}
	g.held.Add(w)
	return func() {
		g.held.Add(-w)
		g.sem.Release(w)
	}, nil
}

// Held is the bytes of the requests inside the gate now.
func (g *requestGate) Held() int64 { return g.held.Load() }

// Waiting is the number of requests waiting to enter the gate now.
func (g *requestGate) Waiting() int64 { return g.waiting.Load() }

// gatedKey marks a request's context once gateBody has let it in.
type gatedKey struct{}

// gateBody lets a unary Connect request over HTTP/1.1 whose uncompressed
// body has a declared length (Content-Length) through the gate before its
// body is read, sized by that length: a request waiting for its turn holds
// none of its body, which TCP keeps with the client. It runs after
// authentication, so only known users wait here. The wait ends with the
// client going away or the request's Connect-Timeout-Ms; once let in, the
// request has limited time to send its body (limitBodyTime). Other requests
// pass to gateInterceptor, which sizes their decoded message: gRPC,
// Connect streams, compressed or chunked bodies, and HTTP/2, where the
// unread body of a waiting request would take the connection's flow-control
// window from the requests sharing it, the one inside the gate included.
func (g *requestGate) gateBody(h http.Handler, ew *connect.ErrorWriter, m *metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength < gateMinBytes || r.ProtoMajor != 1 || r.Method != http.MethodPost || r.URL.Path == flussv1connect.ReadServiceScanProcedure ||
			!unaryContentType(r.Header.Get("Content-Type")) || compressed(r.Header) {
			h.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		if d, ok := connectTimeout(r.Header); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		leave, err := g.enter(ctx, int(r.ContentLength))
		if err != nil {
			code := connect.CodeCanceled
			if errors.Is(err, context.DeadlineExceeded) {
				code = connect.CodeDeadlineExceeded
			}
			cerr := connect.NewError(code, err)
			m.observe(r.URL.Path, cerr.Code().String(), 0)
			_ = ew.Write(w, r, cerr)
			return
		}
		defer leave()
		r = r.WithContext(context.WithValue(r.Context(), gatedKey{}, true))
		limitBodyTime(w, r)
		h.ServeHTTP(w, r)
	})
}

// An admitted request has bodyGrace plus a second per minBodyRate bytes
// to send its body (74 s for 64 MiB): a client that stalls or trickles
// loses its request rather than holding the gate for everyone. Variables
// for tests.
var (
	bodyGrace   = 10 * time.Second
	minBodyRate = int64(1 << 20) // bytes per second
)

// limitBodyTime sets a read deadline for r's body (of declared length) on
// its connection and clears it once the body is read, so that it does not
// cut the connection later.
func limitBodyTime(w http.ResponseWriter, r *http.Request) {
	d := bodyGrace + time.Duration(r.ContentLength*int64(time.Second)/minBodyRate)
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return // not supported by this connection: no limit
	}
	r.Body = &timedBody{ReadCloser: r.Body, rc: rc, d: d}
}

// timedBody is a request body read under a deadline (limitBodyTime).
type timedBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	d       time.Duration
	cleared bool
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.cleared {
		// Read in time: the connection goes on without a deadline.
		b.cleared = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	// After a timeout the deadline stays: draining the rest fails at once.
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		err = connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf(
			"the request body did not arrive within %v of the request's turn (%v plus a second per %d bytes): send it faster, or in smaller requests",
			b.d.Round(time.Millisecond), bodyGrace, minBodyRate))
	}
	return n, err
}

// compressed reports whether a request's body is compressed as a whole
// (Content-Encoding; Connect unary requests and plain JSON Scans).
func compressed(h http.Header) bool {
	enc := h.Get("Content-Encoding")
	return enc != "" && enc != "identity"
}

// connectTimeout is a request's Connect-Timeout-Ms, if it has a valid one.
func connectTimeout(h http.Header) (time.Duration, bool) {
	v := h.Get("Connect-Timeout-Ms")
	if v == "" || len(v) > 10 {
		return 0, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// gateInterceptor passes every unary request that gateBody did not take
// through the gate, sized by its message. Streams (Scan) send small
// requests and are not gated.
type gateInterceptor struct{ g *requestGate }

func (gi gateInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if ctx.Value(gatedKey{}) != nil {
			return next(ctx, req)
		}
		var size int
		if m, ok := req.Any().(proto.Message); ok {
			size = proto.Size(m)
		}
		leave, err := gi.g.enter(ctx, size)
		if err != nil {
			return nil, err
		}
		defer leave() // also when the handler panics
		return next(ctx, req)
	}
}

func (gateInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (gateInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
