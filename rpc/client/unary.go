package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// unaryHTTP is the HTTP client behind New's default: unary Connect calls
// (Content-Type application/proto or application/json) over HTTP/1.1, each
// request written and its response read on the calling goroutine, on a
// pool of keep-alive connections. Everything else — streaming calls, other
// schemes — goes to next.
//
// Why not net/http's Transport alone: it runs two goroutines per
// connection and hands every request and response between them and the
// caller, four goroutine switches per call. On a machine whose cores the
// client shares with the server that hand-off was most of the client's
// CPU per 1-row request (docs/BENCHMARKS.md). The wire format is still
// produced and parsed by net/http (Header.Write, http.ReadResponse); only
// the scheduling differs.
type unaryHTTP struct {
	next    connect.HTTPClient
	dialer  net.Dialer
	maxIdle int           // idle connections kept per host
	idleFor time.Duration // idle connections older than this are closed

	mu   sync.Mutex
	idle map[string][]*unaryConn // by host:port, most recently used last
}

type unaryConn struct {
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	idle time.Time // when it was put back
}

// unaryBufferBytes sizes each connection's read and write buffers: a
// request or answer of a few rows fits in one syscall each way.
const unaryBufferBytes = 16 << 10

// unaryPreallocMax is the largest answer whose Content-Length is allocated
// up front; larger ones grow as they arrive, so a wrong header cannot make
// the client allocate what never comes.
const unaryPreallocMax = 1 << 20

// staleCheckAfter is how long a connection may sit idle before it is
// checked for a close by the server before reuse (one non-blocking peek).
// Under load connections come back within milliseconds and skip the check.
const staleCheckAfter = 500 * time.Millisecond

func newUnaryHTTP(next connect.HTTPClient) *unaryHTTP {
	return &unaryHTTP{
		next:    next,
		dialer:  net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle: 64,
		idleFor: 90 * time.Second,
		idle:    make(map[string][]*unaryConn),
	}
}

// isUnary reports whether r is a unary Connect call this client serves.
func isUnary(r *http.Request) bool {
	if r.Method != http.MethodPost || r.URL.Scheme != "http" || r.ContentLength < 0 {
		return false
	}
	ct := r.Header.Get("Content-Type")
	return ct == "application/proto" || ct == "application/json" || strings.HasPrefix(ct, "application/json;")
}

// Do implements connect.HTTPClient.
func (t *unaryHTTP) Do(r *http.Request) (*http.Response, error) {
	if !isUnary(r) {
		return t.next.Do(r)
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	host := r.URL.Host
	if !strings.Contains(host, ":") {
		host += ":80"
	}
	c, err := t.get(ctx, host)
	if err != nil {
		return nil, err
	}
	// A cancelled or expired context interrupts the call by moving the
	// connection's deadline into the past; such a connection is not reused.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	resp, err := c.roundTrip(r, body)
	interrupted := !stop()
	if err != nil || interrupted || resp.Close {
		_ = c.c.Close()
		if interrupted {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err)
		}
		return resp, nil
	}
	t.put(host, c)
	return resp, nil
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	defer r.Body.Close() // a client closes the request body, error or not
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		return nil, fmt.Errorf("read request body of %d bytes: %w", r.ContentLength, err)
	}
	return buf, nil
}

// roundTrip writes r with body and reads the whole answer.
func (c *unaryConn) roundTrip(r *http.Request, body []byte) (*http.Response, error) {
	w := c.bw
	w.WriteString("POST ")
	w.WriteString(r.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	if r.Host != "" {
		w.WriteString(r.Host)
	} else {
		w.WriteString(r.URL.Host)
	}
	w.WriteString("\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(body)))
	w.WriteString("\r\n")
	if err := r.Header.WriteSubset(w, skipHeaders); err != nil {
		return nil, err
	}
	w.WriteString("\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, r)
	if err != nil {
		return nil, err
	}
	var data []byte
	if resp.ContentLength >= 0 && resp.ContentLength <= unaryPreallocMax {
		data = make([]byte, resp.ContentLength)
		_, err = io.ReadFull(resp.Body, data)
	} else { // chunked, or too large to trust the header with an allocation
		data, err = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// skipHeaders are written by roundTrip itself.
var skipHeaders = map[string]bool{"Host": true, "Content-Length": true, "Connection": true, "Transfer-Encoding": true}

// get returns an idle connection to host or dials one.
func (t *unaryHTTP) get(ctx context.Context, host string) (*unaryConn, error) {
	now := time.Now()
	t.mu.Lock()
	for {
		conns := t.idle[host]
		if len(conns) == 0 {
			break
		}
		c := conns[len(conns)-1]
		conns[len(conns)-1] = nil
		t.idle[host] = conns[:len(conns)-1]
		if now.Sub(c.idle) > t.idleFor || (now.Sub(c.idle) > staleCheckAfter && closedByPeer(c.c)) {
			t.mu.Unlock()
			_ = c.c.Close()
			t.mu.Lock()
			continue
		}
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	nc, err := t.dialer.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	return &unaryConn{c: nc, br: bufio.NewReaderSize(nc, unaryBufferBytes), bw: bufio.NewWriterSize(nc, unaryBufferBytes)}, nil
}

// put keeps c for reuse, or closes it when enough are idle.
func (t *unaryHTTP) put(host string, c *unaryConn) {
	if c.br.Buffered() > 0 { // bytes nobody asked for: the stream is off
		_ = c.c.Close()
		return
	}
	c.idle = time.Now()
	t.mu.Lock()
	if len(t.idle[host]) < t.maxIdle {
		t.idle[host] = append(t.idle[host], c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.c.Close()
	}
}

// CloseIdleConnections closes the idle connections of both paths.
func (t *unaryHTTP) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string][]*unaryConn)
	t.mu.Unlock()
	for _, conns := range idle {
		for _, c := range conns {
			_ = c.c.Close()
		}
	}
	if ci, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
