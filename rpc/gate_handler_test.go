package rpc_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/raftmeta"
	"github.com/fluss-node/fluss-node/rpc"
	"github.com/fluss-node/fluss-node/rpc/client"
	"github.com/fluss-node/fluss-node/rpc/internal/membackend"
)

// holdingBackend holds every Append of more than one row until released,
// and records how many were inside at once.
type holdingBackend struct {
	*membackend.Backend
	release      chan struct{}
	closeRelease sync.Once
	inside       atomic.Int32
	most         atomic.Int32
}

func (b *holdingBackend) Append(ctx context.Context, id raftmeta.BucketID, batches [][]byte, writerID int64, seq int32) (rpc.AppendResult, error) {
	if len(batches) == 1 && len(batches[0]) > 4<<10 {
		n := b.inside.Add(1)
		for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
		}
		defer b.inside.Add(-1)
		select {
		case <-b.release:
		case <-ctx.Done():
			return rpc.AppendResult{}, ctx.Err()
		}
	}
	return b.Backend.Append(ctx, id, batches, writerID, seq)
}

// releaseAll lets every held Append (and any later one) go on.
func (b *holdingBackend) releaseAll() { b.closeRelease.Do(func() { close(b.release) }) }

// startGated serves a holdingBackend whose max_inflight_request_bytes has
// room for one largeRows request, with table shop.t (id BIGINT, s STRING)
// of one bucket, and returns it, its URL and a client with opts that does
// not retry.
func startGated(t *testing.T, opts ...client.Option) (*holdingBackend, string, *client.Client) {
	t.Helper()
	b := &holdingBackend{Backend: membackend.New(), release: make(chan struct{})}
	url := serveHTTP(t, rpc.NewHandler(b, rpc.Limits{MaxInflightRequestBytes: 300 << 10}, prometheus.NewRegistry(), nil))
	t.Cleanup(b.releaseAll) // runs before the server closes
	c := client.New(url, append(opts, client.WithRetry(client.Retry{Attempts: 1}))...)
	ctx := context.Background()
	if err := c.CreateDatabase(ctx, "shop", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{Table: "shop.t", BucketCount: 1,
		Schema: &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}, {Name: "s", Type: "STRING"}}}}); err != nil {
		t.Fatal(err)
	}
	return b, url, c
}

// largeRows is 2,000 rows from id first on as the members of a JSON array
// (no brackets): ~200 KiB, of which 300 KiB hold one and not two.
func largeRows(first int) string {
	var sb strings.Builder
	for i := range 2000 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id":%d,"s":"%s"}`, first+i, strings.Repeat("x", 90))
	}
	return sb.String()
}

// TestLargeRequestsWaitTheirTurn: with max_inflight_request_bytes room for
// one large request, large Appends reach the backend one at a time, small
// ones pass meanwhile, a large one whose deadline passes while it waits is
// refused with nothing stored, and the gauge goes back to 0. Connect
// requests over HTTP/1.1 wait before their body is read; gRPC ones and
// Connect ones sharing an HTTP/2 connection after their message is decoded.
func TestLargeRequestsWaitTheirTurn(t *testing.T) {
	t.Run("connect", func(t *testing.T) { testLargeRequestsWaitTheirTurn(t) })
	t.Run("connect over h2c", func(t *testing.T) {
		testLargeRequestsWaitTheirTurn(t, client.WithHTTPClient(client.DefaultHTTPClient(true)))
	})
	t.Run("grpc", func(t *testing.T) {
		testLargeRequestsWaitTheirTurn(t, client.WithGRPC(), client.WithHTTPClient(client.DefaultHTTPClient(true)))
	})
}

func testLargeRequestsWaitTheirTurn(t *testing.T, opts ...client.Option) {
	b, url, c := startGated(t, opts...)
	ctx := context.Background()
	large := func(first int) []byte { return []byte("[" + largeRows(first) + "]") }

	const n = 3
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range n {
		wg.Go(func() {
			_, err := c.Append(ctx, "shop.t", large(k*2000))
			errs <- err
		})
	}
	waitFor(t, "a large Append inside the backend", func() bool { return b.inside.Load() > 0 })
	if got := gaugeValue(t, url, "fluss_rpc_inflight_request_bytes"); got < 200<<10 {
		t.Errorf("fluss_rpc_inflight_request_bytes = %v with a large request inside", got)
	}

	// Small requests do not wait for the large ones.
	if _, err := c.Append(ctx, "shop.t", []byte(`[{"id":-1,"s":"small"}]`)); err != nil {
		t.Fatalf("small Append while large ones wait: %v", err)
	}
	// A large request that cannot get in before its deadline is refused.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := c.Append(short, "shop.t", large(100000))
	cancel()
	if code := connect.CodeOf(err); code != connect.CodeDeadlineExceeded {
		t.Fatalf("large Append past its deadline while waiting: %v (code %v), want deadline_exceeded", err, code)
	}
	// The server's clock for that deadline starts when the request
	// arrives, so it may still be waiting: the gate must not open before
	// the server has refused it too (else it is stored, as a request whose
	// client gave up may be).
	waitFor(t, "the server to refuse the late Append", func() bool {
		return appendsRefused(t, url) == 1
	})

	if m := b.most.Load(); m != 1 {
		t.Fatalf("%d large Appends were inside the backend at once, want 1", m)
	}
	for range n {
		b.release <- struct{}{}
	}
	b.releaseAll()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("large Append: %v", err)
		}
	}
	if m := b.most.Load(); m != 1 {
		t.Errorf("%d large Appends were inside the backend at once, want 1", m)
	}
	if got := gaugeValue(t, url, "fluss_rpc_inflight_request_bytes"); got != 0 {
		t.Errorf("fluss_rpc_inflight_request_bytes = %v after every request answered", got)
	}
	off, err := c.ListOffsets(ctx, "shop.t", flussv1.ListOffsetsRequest_LATEST, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(off) != 1 || off[0].GetOffset() != n*2000+1 {
		t.Fatalf("offsets after the Appends: %v, want %d rows (the refused request stored nothing)", off, n*2000+1)
	}
}

// appendsRefused is the number of Appends the server answered with
// deadline_exceeded or canceled (fluss_rpc_requests_total).
func appendsRefused(t *testing.T, url string) float64 {
	t.Helper()
	var n float64
	for _, code := range []string{"deadline_exceeded", "canceled"} {
		n += metricValue(t, url, `fluss_rpc_requests_total{code="`+code+`",procedure="/fluss.v1.WriteService/Append"}`, true)
	}
	return n
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// gaugeValue reads one unlabelled metric from /metrics.
func gaugeValue(t *testing.T, url, name string) float64 {
	t.Helper()
	return metricValue(t, url, name, false)
}

// metricValue reads the sample named series (a name and its labels) from
// /metrics; one that is not there is 0 if absentIsZero, else a failure.
func metricValue(t *testing.T, url, series string, absentIsZero bool) float64 {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	if !absentIsZero {
		t.Fatalf("%s not in /metrics", series)
	}
	return 0
}

// countingBody is a request body that counts the bytes the server pulled.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

// TestWaitingRequestsHoldNoBody: a large Connect JSON request of declared
// length that must wait for the gate waits before its body is read. The
// client sends "Expect: 100-continue" and so sends no byte of the body
// until the server reads it: while the request waits not one byte was
// pulled; after the gate has room it is read and stored. One that waits
// past its Connect-Timeout-Ms is refused with deadline_exceeded, unread.
func TestWaitingRequestsHoldNoBody(t *testing.T) {
	b, url, c := startGated(t)
	ctx := context.Background()
	firstDone := make(chan error, 1)
	go func() {
		_, err := c.Append(ctx, "shop.t", []byte("["+largeRows(0)+"]"))
		firstDone <- err
	}()
	waitFor(t, "the first large Append inside the backend", func() bool { return b.inside.Load() == 1 })

	hc := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	send := func(first int, timeoutMs string) (*countingBody, chan *http.Response, chan error) {
		msg := `{"table":"shop.t","rows":[` + largeRows(first) + `]}`
		body := &countingBody{r: strings.NewReader(msg)}
		req, err := http.NewRequest(http.MethodPost, url+"/fluss.v1.WriteService/Append", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(msg))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		if timeoutMs != "" {
			req.Header.Set("Connect-Timeout-Ms", timeoutMs)
		}
		resc, errc := make(chan *http.Response, 1), make(chan error, 1)
		go func() {
			res, err := hc.Do(req)
			if err != nil {
				errc <- err
				return
			}
			resc <- res
		}()
		return body, resc, errc
	}
	answer := func(resc chan *http.Response, errc chan error) (int, string) {
		select {
		case res := <-resc:
			defer res.Body.Close()
			text, _ := io.ReadAll(res.Body)
			return res.StatusCode, string(text)
		case err := <-errc:
			t.Fatalf("request: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("no answer in 10 s")
		}
		return 0, ""
	}

	// Past its deadline while waiting: refused, nothing of it read.
	late, resc, errc := send(100000, "200")
	status, text := answer(resc, errc)
	if status != http.StatusGatewayTimeout || !strings.Contains(text, `"deadline_exceeded"`) || !strings.Contains(text, "max_inflight_request_bytes") {
		t.Errorf("large Append past its deadline while waiting: %d %s, want 504 deadline_exceeded naming the limit", status, text)
	}
	if n := late.read.Load(); n != 0 {
		t.Errorf("the refused request's body: %d bytes read, want 0", n)
	}

	second, resc, errc := send(2000, "")
	waitFor(t, "the second large Append waiting at the gate", func() bool {
		return gaugeValue(t, url, "fluss_rpc_gate_waiting_requests") == 1
	})
	if n := second.read.Load(); n != 0 {
		t.Fatalf("the waiting request's body: %d bytes read, want 0", n)
	}
	b.release <- struct{}{} // the first
	if err := <-firstDone; err != nil {
		t.Fatalf("first large Append: %v", err)
	}
	waitFor(t, "the second large Append inside the backend", func() bool { return b.inside.Load() == 1 })
	b.releaseAll()
	if status, text := answer(resc, errc); status != http.StatusOK {
		t.Fatalf("second large Append: %d %s", status, text)
	}
	if n := second.read.Load(); n == 0 {
		t.Errorf("the second request's body was never read")
	}
	off, err := c.ListOffsets(ctx, "shop.t", flussv1.ListOffsetsRequest_LATEST, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(off) != 1 || off[0].GetOffset() != 4000 {
		t.Fatalf("offsets after the Appends: %v, want 4000 rows (the refused request stored nothing)", off)
	}
	if got := gaugeValue(t, url, "fluss_rpc_gate_waiting_requests"); got != 0 {
		t.Errorf("fluss_rpc_gate_waiting_requests = %v after every request answered", got)
	}
}

// TestStalledBodyLosesItsTurn: a client that is let in and then stops
// sending its body loses the request when its body time is up (here
// 300 ms), with deadline_exceeded and a message that says why, and the
// gate is free for the next large request.
func TestStalledBodyLosesItsTurn(t *testing.T) {
	defer rpc.SetBodyTime(300*time.Millisecond, 1<<40)()
	b, url, c := startGated(t)
	b.releaseAll() // nothing is held in the backend here
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msg := `{"table":"shop.t","rows":[` + largeRows(0) + `]}`
	fmt.Fprintf(conn, "POST /fluss.v1.WriteService/Append HTTP/1.1\r\nHost: fluss\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(msg), msg[:len(msg)/2]) // and then nothing more
	waitFor(t, "the stalled request inside the gate", func() bool {
		return gaugeValue(t, url, "fluss_rpc_inflight_request_bytes") > 0
	})
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to the stalled request: %v", err)
	}
	text, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(text), `"deadline_exceeded"`) ||
		!strings.Contains(string(text), "the request body did not arrive within 300ms") {
		t.Errorf("stalled request: %d %s, want 504 deadline_exceeded saying the body did not arrive", res.StatusCode, text)
	}
	if got := gaugeValue(t, url, "fluss_rpc_inflight_request_bytes"); got != 0 {
		t.Errorf("fluss_rpc_inflight_request_bytes = %v after the stalled request was refused", got)
	}
	if _, err := c.Append(context.Background(), "shop.t", []byte("["+largeRows(0)+"]")); err != nil {
		t.Fatalf("large Append after the stalled one: %v", err)
	}
	off, err := c.ListOffsets(context.Background(), "shop.t", flussv1.ListOffsetsRequest_LATEST, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(off) != 1 || off[0].GetOffset() != 2000 {
		t.Fatalf("offsets: %v, want the 2000 rows of the second request only", off)
	}
}
