// Command rpcfloor measures what the client API's transport alone costs on
// this machine: the product's Go client (rpc/client, Connect proto over
// HTTP/1.1, as `fluss-node bench` uses it) against a server process whose
// Lookup and Append handlers do no work at all. Lookup answers one constant
// row per key; Append answers one result. The figures are the floor under
// `bench lookup` and `bench produce` with the same client counts: no
// storage engine, however fast, beats them through this API on this
// machine.
//
//	go run ./integration/bench/rpcfloor --op lookup --clients 1,16,64 --batched
//	go run ./integration/bench/rpcfloor --op append --clients 64
//
// The server is this program started again as a child process on
// 127.0.0.1 (--serve), so client and server are separate processes sharing
// the machine's cores, as in `fluss-node bench`. It stops with the run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// row is the answer to every looked-up key: a row of the bench's PK table.
const row = `{"id":1,"user_id":420757,"ts":1714598164512,"event_type":"view","country":"US","amount":"8120.42","quantity":3,"price":417.5,"session":"s5b1c6d2e","is_mobile":true}`

func main() {
	serve := flag.String("serve", "", "internal: serve the no-op handlers on this address")
	op := flag.String("op", "lookup", "lookup (1-key Lookup requests) or append (1-row JSON Append requests)")
	clientsFlag := flag.String("clients", "1,16,64", "concurrent clients, one run each")
	duration := flag.Duration("duration", 5*time.Second, "how long each run sends")
	batched := flag.Bool("batched", false, "with --op lookup: also run the clients as goroutines sharing one batching client (client.Lookuper)")
	addr := flag.String("addr", "127.0.0.1:9581", "loopback address for the server process")
	flag.Parse()
	if *serve != "" {
		if err := serveNoop(*serve); err != nil {
			fmt.Fprintln(os.Stderr, "rpcfloor server:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*op, *clientsFlag, *duration, *batched, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "rpcfloor:", err)
		os.Exit(1)
	}
}

func run(op, clientsFlag string, d time.Duration, batched bool, addr string) error {
	if op != "lookup" && op != "append" {
		return fmt.Errorf("--op %q: want lookup or append", op)
	}
	var counts []int
	for f := range strings.SplitSeq(clientsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("--clients %q: want positive numbers separated by commas", clientsFlag)
		}
		counts = append(counts, n)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv := exec.Command(self, "--serve", addr)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	if err := waitListening(addr, 10*time.Second); err != nil {
		return err
	}
	fmt.Println("| server | op | clients | requests/s | p50 | p99 | p999 |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	for _, n := range counts {
		var call func(ctx context.Context, c *client.Client) error
		if op == "lookup" {
			call = func(ctx context.Context, c *client.Client) error {
				_, err := c.Lookup(ctx, "bench.lookup", []byte(`[{"id":1}]`), nil)
				return err
			}
		} else {
			call = func(ctx context.Context, c *client.Client) error {
				_, err := c.Append(ctx, "bench.produce", []byte(`[`+row+`]`))
				return err
			}
		}
		lat, err := load(n, d, func() func(context.Context) error {
			c := client.New(addr)
			return func(ctx context.Context) error { return call(ctx, c) }
		})
		if err != nil {
			return err
		}
		report("no-op", op, n, d, lat)
		if op == "lookup" && batched {
			l := client.New(addr).NewLookuper("bench.lookup", client.LookuperOptions{})
			lat, err := load(n, d, func() func(context.Context) error {
				return func(ctx context.Context) error {
					_, err := l.Lookup(ctx, []byte(`{"id":1}`))
					return err
				}
			})
			if err != nil {
				return err
			}
			report("no-op, batched", op, n, d, lat)
		}
	}
	return nil
}

// load runs n workers, each calling the function newWorker made for it in a
// loop for d, and returns every call's latency, sorted.
func load(n int, d time.Duration, newWorker func() func(context.Context) error) ([]time.Duration, error) {
	var (
		mu       sync.Mutex
		all      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	end := time.Now().Add(d)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	for range n {
		call := newWorker()
		wg.Go(func() {
			var lat []time.Duration
			var err error
			for ctx.Err() == nil {
				t0 := time.Now()
				if err = call(ctx); err != nil {
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			// A call cut short by the end of the run is not an error (its
			// deadline may fire before ctx's own).
			if err != nil && time.Now().Before(end) && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	slices.Sort(all)
	if len(all) == 0 && firstErr == nil {
		firstErr = errors.New("no call completed")
	}
	return all, firstErr
}

func report(server, op string, n int, d time.Duration, lat []time.Duration) {
	q := func(p float64) string {
		return lat[min(len(lat)-1, int(float64(len(lat))*p))].Round(time.Microsecond).String()
	}
	fmt.Printf("| %s | %s | %d | %.0f | %s | %s | %s |\n", server, op, n, float64(len(lat))/d.Seconds(), q(0.5), q(0.99), q(0.999))
}

func waitListening(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server on %s did not listen within %v: %w", addr, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noop answers Lookup and Append without doing anything.
type noop struct {
	flussv1connect.UnimplementedReadServiceHandler
	flussv1connect.UnimplementedWriteServiceHandler
}

func (noop) Lookup(_ context.Context, req *connect.Request[flussv1.LookupRequest]) (*connect.Response[flussv1.LookupResponse], error) {
	var keys []json.RawMessage
	if err := json.Unmarshal(req.Msg.GetKeys(), &keys); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	out := []byte{'['}
	for i := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, row...)
	}
	return connect.NewResponse(&flussv1.LookupResponse{Rows: append(out, ']')}), nil
}

func (noop) Append(context.Context, *connect.Request[flussv1.AppendRequest]) (*connect.Response[flussv1.AppendResponse], error) {
	return connect.NewResponse(&flussv1.AppendResponse{Results: []*flussv1.AppendResult{{Bucket: 0, BaseOffset: 1, Count: 1}}}), nil
}

// serveNoop serves the no-op handlers the way the node's client listener
// does: HTTP/1.1 and cleartext HTTP/2 on one port.
func serveNoop(addr string) error {
	mux := http.NewServeMux()
	mux.Handle(flussv1connect.NewReadServiceHandler(noop{}))
	mux.Handle(flussv1connect.NewWriteServiceHandler(noop{}))
	return (&http.Server{Addr: addr, Handler: h2c.NewHandler(mux, &http2.Server{}), ReadHeaderTimeout: 10 * time.Second}).ListenAndServe()
}
