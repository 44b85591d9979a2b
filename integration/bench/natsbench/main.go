// Command natsbench publishes to a NATS JetStream stream from concurrent
// goroutines and prints acknowledged messages/s with latency quantiles, as
// the NATS side of integration/bench/cluster.sh. It lives in its own module
// so that fluss-node's go.mod does not depend on NATS.
//
//	natsbench --servers nats://127.0.0.1:4222 --clients 64 --size 200 --duration 10s
//
// A message counts once its publish acknowledgement (the stream stored it
// on a quorum of its replicas) has arrived. Mode "sync" sends one message
// and waits for its ack per goroutine; mode "async" keeps up to --window
// unacknowledged messages in flight per goroutine.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type config struct {
	servers  string
	stream   string
	streams  int
	replicas int
	clients  int
	size     int
	window   int
	mode     string
	duration time.Duration
	label    string
}

type result struct {
	acked   int64
	errs    int64
	elapsed time.Duration
	lat     []time.Duration // sorted; per message (sync) or per ack (async)
	first   error
}

func main() {
	var c config
	flag.StringVar(&c.servers, "servers", "nats://127.0.0.1:4222", "comma-separated server URLs")
	flag.StringVar(&c.stream, "stream", "BENCH", "stream name prefix; (re)created")
	flag.IntVar(&c.streams, "streams", 1, "streams to spread the clients over (subjects bench.<i>)")
	flag.IntVar(&c.replicas, "replicas", 3, "stream replicas")
	flag.IntVar(&c.clients, "clients", 64, "concurrent publishers, each on its own connection")
	flag.IntVar(&c.size, "size", 200, "message payload bytes")
	flag.IntVar(&c.window, "window", 256, "async: unacknowledged messages per publisher")
	flag.StringVar(&c.mode, "mode", "sync", "sync (js.Publish per message) or async (PublishAsync with --window)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "how long to publish")
	flag.StringVar(&c.label, "label", "", "label of the printed row (default: mode)")
	header := flag.Bool("header", false, "print the table header first")
	flag.Parse()
	if *header {
		printHeader()
	}
	r, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsbench:", err)
		os.Exit(1)
	}
	printRow(c, r)
}

func run(c config) (*result, error) {
	if c.clients < 1 || c.size < 1 || c.streams < 1 || c.window < 1 {
		return nil, errors.New("--clients, --size, --streams and --window must be at least 1")
	}
	if c.mode != "sync" && c.mode != "async" {
		return nil, fmt.Errorf("--mode %q: want sync or async", c.mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.duration+2*time.Minute)
	defer cancel()
	admin, err := nats.Connect(c.servers)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", c.servers, err)
	}
	defer admin.Close()
	ajs, err := jetstream.New(admin)
	if err != nil {
		return nil, err
	}
	for i := 0; i < c.streams; i++ {
		name := fmt.Sprintf("%s%d", c.stream, i)
		// Both wait for a JetStream meta leader, which a cluster that just
		// reported healthy may not have elected yet: retry while it forms.
		err := retryForming(ctx, func() error {
			if err := ajs.DeleteStream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
				return err
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("delete stream %s: %w", name, err)
		}
		err = retryForming(ctx, func() error {
			_, err := ajs.CreateStream(ctx, jetstream.StreamConfig{
				Name:     name,
				Subjects: []string{fmt.Sprintf("bench.%d", i)},
				Storage:  jetstream.FileStorage,
				Replicas: c.replicas,
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("create stream %s (R%d): %w", name, c.replicas, err)
		}
	}
	payload := make([]byte, c.size)
	rand.Read(payload)

	var (
		res   result
		mu    sync.Mutex
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	runCtx, stop := context.WithTimeout(ctx, c.duration)
	defer stop()
	start := time.Now()
	for w := 0; w < c.clients; w++ {
		wg.Go(func() {
			nc, err := nats.Connect(c.servers)
			if err != nil {
				first.CompareAndSwap(nil, &err)
				return
			}
			defer nc.Close()
			js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(c.window))
			if err != nil {
				first.CompareAndSwap(nil, &err)
				return
			}
			subj := fmt.Sprintf("bench.%d", w%c.streams)
			var lat []time.Duration
			var acked, errs int64
			if c.mode == "sync" {
				for runCtx.Err() == nil {
					t0 := time.Now()
					// Not bound to the run's deadline: publishes in flight
					// when the time is up complete.
					if _, err := js.Publish(ctx, subj, payload); err != nil {
						errs++
						first.CompareAndSwap(nil, &err)
						continue
					}
					lat = append(lat, time.Since(t0))
					acked++
				}
			} else {
				type sent struct {
					f  jetstream.PubAckFuture
					t0 time.Time
				}
				pending := make([]sent, 0, c.window)
				drain := func(all bool) {
					for len(pending) > 0 && (all || len(pending) >= c.window) {
						p := pending[0]
						pending = pending[1:]
						select {
						case <-p.f.Ok():
							lat = append(lat, time.Since(p.t0))
							acked++
						case err := <-p.f.Err():
							errs++
							first.CompareAndSwap(nil, &err)
						case <-ctx.Done():
							return
						}
					}
				}
				for runCtx.Err() == nil {
					f, err := js.PublishAsync(subj, payload)
					if err != nil {
						errs++
						first.CompareAndSwap(nil, &err)
						continue
					}
					pending = append(pending, sent{f, time.Now()})
					drain(false)
				}
				drain(true)
			}
			mu.Lock()
			res.acked += acked
			res.errs += errs
			res.lat = append(res.lat, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.lat)
	if e := first.Load(); e != nil {
		res.first = *e
		if res.acked == 0 {
			return nil, fmt.Errorf("no publish acknowledged: %w", *e)
		}
	}
	return &res, nil
}

func quantile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[int(q*float64(len(lat)-1))]
}

func printHeader() {
	fmt.Println("| system | workload | clients | msg bytes | acked msgs/s | MB/s | p50 | p99 | errors |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
}

func printRow(c config, r *result) {
	label := c.label
	if label == "" {
		label = c.mode
		if c.mode == "async" {
			label = fmt.Sprintf("async, window %d", c.window)
		}
		label += fmt.Sprintf(", %d stream(s) R%d", c.streams, c.replicas)
	}
	secs := r.elapsed.Seconds()
	fmt.Printf("| NATS JetStream | %s | %d | %d | %.0f | %.1f | %s | %s | %d |\n",
		strings.ReplaceAll(label, "|", "/"), c.clients, c.size, float64(r.acked)/secs,
		float64(r.acked)*float64(c.size)/secs/1e6,
		quantile(r.lat, 0.50).Round(time.Microsecond), quantile(r.lat, 0.99).Round(time.Microsecond), r.errs)
	if r.first != nil {
		fmt.Fprintf(os.Stderr, "natsbench: first error: %v\n", r.first)
	}
}

// retryForming calls f until it succeeds or ctx ends (then f's last error).
func retryForming(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
