package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer answers every POST with its body, the request's
// Content-Type and X-Probe headers echoed, and counts the connections it
// accepted.
func echoServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
			w.Header().Set("X-Probe", r.Header.Get("X-Probe"))
			w.Write(b)
		}
	}
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func unaryRequest(t *testing.T, ctx context.Context, url, contentType, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/fluss.v1.ReadService/Lookup", io.NopCloser(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	r.ContentLength = int64(len(body)) // as connect-go sets it for unary calls
	r.Header.Set("Content-Type", contentType)
	r.Header.Set("X-Probe", "probe-"+body)
	return r
}

func doEcho(t *testing.T, c *unaryHTTP, url, body string) {
	t.Helper()
	resp, err := c.Do(unaryRequest(t, context.Background(), url, "application/proto", body))
	if err != nil {
		t.Fatalf("call with body %q: %v", body, err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || string(got) != body || resp.Header.Get("X-Probe") != "probe-"+body ||
		resp.Header.Get("Content-Type") != "application/proto" {
		t.Fatalf("answer %d %q (X-Probe %q, Content-Type %q), want 200 %q echoed with its headers",
			resp.StatusCode, got, resp.Header.Get("X-Probe"), resp.Header.Get("Content-Type"), body)
	}
}

// failNext fails the test if a request reaches it.
type failNext struct{ t *testing.T }

func (f failNext) Do(r *http.Request) (*http.Response, error) {
	f.t.Errorf("%s %s (Content-Type %q) went to the fallback", r.Method, r.URL, r.Header.Get("Content-Type"))
	return nil, errors.New("unexpected fallback")
}

func TestUnaryHTTPReusesOneConnection(t *testing.T) {
	srv, conns := echoServer(t, nil)
	c := newUnaryHTTP(failNext{t})
	for i := range 20 {
		doEcho(t, c, srv.URL, fmt.Sprintf("request %d", i))
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 calls in turn used %d connections, want 1", n)
	}
	doEcho(t, c, srv.URL, "") // an empty body is a valid message
}

func TestUnaryHTTPConcurrentCallsGetTheirOwnAnswers(t *testing.T) {
	srv, conns := echoServer(t, nil)
	c := newUnaryHTTP(failNext{t})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				doEcho(t, c, srv.URL, fmt.Sprintf("caller %d request %d:%s", g, i, strings.Repeat("x", i*100)))
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n < 1 || n > 8 {
		t.Fatalf("8 concurrent callers used %d connections, want 1..8", n)
	}
}

func TestUnaryHTTPReadsChunkedAndErrorAnswers(t *testing.T) {
	srv, _ := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Probe") == "probe-fail" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"code":"not_found","message":"table db.t not found"}`)
			return
		}
		for i := range 3 { // no Content-Length: chunked
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
		}
	})
	c := newUnaryHTTP(failNext{t})
	for range 2 { // the second call reuses the connection after a chunked answer
		resp, err := c.Do(unaryRequest(t, context.Background(), srv.URL, "application/json", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(resp.Body); string(got) != "part0;part1;part2;" {
			t.Fatalf("chunked answer read as %q", got)
		}
	}
	resp, err := c.Do(unaryRequest(t, context.Background(), srv.URL, "application/json", "fail"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(got), "not_found") {
		t.Fatalf("error answer: %d %q, want 404 with its body", resp.StatusCode, got)
	}
}

func TestUnaryHTTPHonoursConnectionClose(t *testing.T) {
	srv, conns := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Connection", "close")
		io.WriteString(w, "bye")
	})
	c := newUnaryHTTP(failNext{t})
	for range 3 {
		resp, err := c.Do(unaryRequest(t, context.Background(), srv.URL, "application/proto", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(resp.Body); string(got) != "bye" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("3 calls answered with Connection: close used %d connections, want 3", n)
	}
}

// A connection the server closed while it sat idle is noticed before reuse:
// the next call dials instead of failing.
func TestUnaryHTTPSkipsConnectionClosedWhileIdle(t *testing.T) {
	srv, conns := echoServer(t, nil)
	c := newUnaryHTTP(failNext{t})
	doEcho(t, c, srv.URL, "before")
	srv.CloseClientConnections()
	time.Sleep(staleCheckAfter + 100*time.Millisecond)
	doEcho(t, c, srv.URL, "after")
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the closed one replaced)", n)
	}
}

// A context that ends interrupts a call that waits for its answer; the
// interrupted connection is not reused.
func TestUnaryHTTPContextInterruptsCall(t *testing.T) {
	release := make(chan struct{})
	srv, conns := echoServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Probe") == "probe-slow" {
			<-release
		}
		io.WriteString(w, "ok")
	})
	defer close(release)
	c := newUnaryHTTP(failNext{t})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Do(unaryRequest(t, ctx, srv.URL, "application/proto", "slow"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call past its deadline: %v, want context.DeadlineExceeded", err)
	}
	resp, err := c.Do(unaryRequest(t, context.Background(), srv.URL, "application/proto", "fast"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(resp.Body); string(got) != "ok" {
		t.Fatalf("answer after an interrupted call: %q", got)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the interrupted one not reused)", n)
	}
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := c.Do(unaryRequest(t, cancelled, srv.URL, "application/proto", "x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("call with a cancelled context: %v, want context.Canceled", err)
	}
}

// recordNext records what reached the fallback client.
type recordNext struct{ got []string }

func (n *recordNext) Do(r *http.Request) (*http.Response, error) {
	n.got = append(n.got, r.Method+" "+r.URL.Scheme+" "+r.Header.Get("Content-Type"))
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
}

func TestUnaryHTTPLeavesOtherRequestsToFallback(t *testing.T) {
	next := &recordNext{}
	c := newUnaryHTTP(next)
	stream := unaryRequest(t, context.Background(), "http://127.0.0.1:1", "application/connect+proto", "x")
	stream.ContentLength = -1
	tls := unaryRequest(t, context.Background(), "https://127.0.0.1:1", "application/proto", "x")
	grpc := unaryRequest(t, context.Background(), "http://127.0.0.1:1", "application/grpc", "x")
	get, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*http.Request{stream, tls, grpc, get} {
		if _, err := c.Do(r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"POST http application/connect+proto", "POST https application/proto", "POST http application/grpc", "GET http "}
	if fmt.Sprint(next.got) != fmt.Sprint(want) {
		t.Fatalf("fallback got %q, want %q", next.got, want)
	}
}

// A server that answers garbage gets an error, and its connection is not
// reused.
func TestUnaryHTTPMalformedAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n := accepted.Add(1)
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				// A Content-Length that is not a number, or one far beyond
				// what follows (the client must not allocate it up front).
				if n%2 == 1 {
					io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: zebra\r\n\r\n")
				} else {
					io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\nshort")
					return
				}
				io.Copy(io.Discard, br)
			}()
		}
	}()
	c := newUnaryHTTP(failNext{t})
	for range 2 {
		if _, err := c.Do(unaryRequest(t, context.Background(), "http://"+ln.Addr().String(), "application/proto", "x")); err == nil {
			t.Fatal("a malformed answer was taken")
		}
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the broken one not reused)", n)
	}
}
