package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	randv2 "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// PKConfig describes a primary-key bench run (`bench upsert`, `bench
// lookup`). The table has the bench produce schema with `id BIGINT` as the
// primary key in place of event_id: 10 columns.
type PKConfig struct {
	Server    string        // base URL
	Token     string        // as ProduceConfig.Token
	Table     string        // "db.table"; (re)created
	Buckets   int           // buckets of the table
	Clients   []int         // concurrent clients; one run per entry
	Keys      int           // distinct keys (lookup: loaded first)
	BatchRows int           // upsert: rows per request
	Duration  time.Duration // per run
	Protocol  string        // as ProduceConfig.Protocol
	Redis     string        // lookup: host:port of a redis-server to compare with ("" none)
	// Batched (lookup): also run each client count as goroutines sharing
	// one client whose Lookuper batches the lookups that meet in flight.
	Batched bool
	// BatchedInflight is the Lookuper's MaxInflight (0: its default).
	BatchedInflight int
	// BatchedLinger is the Lookuper's Linger (0: its default; negative:
	// none).
	BatchedLinger time.Duration
}

// PKRun is the result of one run: one system at one client count.
type PKRun struct {
	System  string // "fluss-node" or "redis"
	Clients int
	Result
	Misses int64 // lookups that found no row
}

// pkColumns is the PK bench schema.
var pkColumns = []*flussv1.Column{
	{Name: "id", Type: "BIGINT", Nullable: new(false)},
	{Name: "user_id", Type: "BIGINT", Nullable: new(false)},
	{Name: "ts", Type: "TIMESTAMP(3)", Nullable: new(false)},
	{Name: "event_type", Type: "STRING", Nullable: new(false)},
	{Name: "country", Type: "STRING", Nullable: new(true)},
	{Name: "amount", Type: "DECIMAL(12,2)", Nullable: new(true)},
	{Name: "quantity", Type: "INT", Nullable: new(true)},
	{Name: "price", Type: "DOUBLE", Nullable: new(true)},
	{Name: "session", Type: "STRING", Nullable: new(true)},
	{Name: "is_mobile", Type: "BOOLEAN", Nullable: new(true)},
}

var (
	pkEventTypes = []string{"view", "click", "add_to_cart", "purchase", "search", "logout"}
	pkCountries  = []string{"US", "DE", "FR", "JP", "BR", "IN", "GB", "CN"}
)

// AppendPKRow appends the bench row of key id, version v, as a JSON object
// to dst. The row is a function of (id, v) only, so a redis comparison can
// store the very same bytes.
func AppendPKRow(dst []byte, id int64, v int64) []byte {
	// PCG: seeding math/rand's default source costs ~10 µs a row, most of
	// the load phase's CPU.
	rnd := randv2.New(randv2.NewPCG(uint64(id), uint64(v)))
	dst = append(dst, `{"id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"user_id":`...)
	dst = strconv.AppendInt(dst, rnd.Int64N(1_000_000), 10)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, 1714564800000+rnd.Int64N(86_400_000), 10)
	dst = append(dst, `,"event_type":"`...)
	dst = append(dst, pkEventTypes[rnd.IntN(len(pkEventTypes))]...)
	dst = append(dst, `","country":"`...)
	dst = append(dst, pkCountries[rnd.IntN(len(pkCountries))]...)
	dst = append(dst, `","amount":"`...)
	dst = strconv.AppendInt(dst, rnd.Int64N(100_000), 10)
	dst = append(dst, '.')
	dst = strconv.AppendInt(dst, 10+rnd.Int64N(90), 10)
	dst = append(dst, `","quantity":`...)
	dst = strconv.AppendInt(dst, 1+rnd.Int64N(10), 10)
	dst = append(dst, `,"price":`...)
	dst = strconv.AppendFloat(dst, float64(rnd.IntN(100_000))/100, 'f', -1, 64)
	dst = append(dst, `,"session":"s`...)
	dst = strconv.AppendUint(dst, uint64(rnd.Uint32()), 16)
	dst = append(dst, `","is_mobile":`...)
	dst = strconv.AppendBool(dst, rnd.IntN(2) == 0)
	return append(dst, '}')
}

// CreatePKTable (re)creates the PK bench table and waits for its leaders.
func CreatePKTable(ctx context.Context, c *client.Client, table string, buckets int) error {
	return recreateTable(ctx, c, &flussv1.CreateTableRequest{
		Table:       table,
		Schema:      &flussv1.Schema{Columns: pkColumns, PrimaryKey: []string{"id"}},
		BucketCount: int32(buckets),
	})
}

// loadBatch is the rows per request while loading.
const loadBatch = 1000

// LoadPK upserts version 0 of keys 0..keys-1 with 4 concurrent loaders.
func LoadPK(ctx context.Context, cfg PKConfig) error {
	copts, err := protocolOptions(cfg.Protocol, cfg.Token)
	if err != nil {
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client.New(cfg.Server, copts...)
			var buf []byte
			for {
				from := next.Add(loadBatch) - loadBatch
				if from >= int64(cfg.Keys) {
					return
				}
				to := min(from+loadBatch, int64(cfg.Keys))
				buf = append(buf[:0], '[')
				for id := from; id < to; id++ {
					if id > from {
						buf = append(buf, ',')
					}
					buf = AppendPKRow(buf, id, 0)
				}
				buf = append(buf, ']')
				if _, err := c.Upsert(ctx, cfg.Table, buf, nil); err != nil {
					errs <- fmt.Errorf("load keys %d..%d: %w", from, to-1, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// LoadRedis sets key "id" to the same row JSON as LoadPK, for keys
// 0..keys-1.
func LoadRedis(ctx context.Context, addr string, keys int) error {
	rc, err := DialRedis(ctx, addr)
	if err != nil {
		return err
	}
	defer rc.Close()
	if d, ok := ctx.Deadline(); ok {
		rc.SetDeadline(d)
	}
	var ks, vs [][]byte
	for from := 0; from < keys; from += loadBatch {
		ks, vs = ks[:0], vs[:0]
		for id := int64(from); id < int64(min(from+loadBatch, keys)); id++ {
			ks = append(ks, strconv.AppendInt(nil, id, 10))
			vs = append(vs, AppendPKRow(nil, id, 0))
		}
		if err := rc.SetMany(ks, vs); err != nil {
			return fmt.Errorf("load redis keys from %d: %w", from, err)
		}
	}
	return nil
}

// worker is one client's loop body: one request, the rows it carried, and
// whether it found nothing (lookups).
type worker func(ctx context.Context, rnd *rand.Rand) (rows int64, miss bool, err error)

// runWorkers runs n workers made by mk for d and gathers their results.
// Requests in flight when the time is up complete and count.
func runWorkers(ctx context.Context, n int, d time.Duration, mk func(w int) (worker, func(), error)) (PKRun, error) {
	run := PKRun{Clients: n}
	workers := make([]worker, n)
	for w := range workers {
		f, closeFn, err := mk(w)
		if err != nil {
			return run, err
		}
		if closeFn != nil {
			defer closeFn()
		}
		workers[w] = f
	}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
	)
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for w, f := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(w) + 1))
			var lat []time.Duration
			var reqs, rows, errs, misses int64
			for runCtx.Err() == nil {
				t0 := time.Now()
				n, miss, err := f(ctx, rnd)
				if err != nil {
					if runCtx.Err() == nil {
						errs++
						firstErr.CompareAndSwap(nil, &err)
					}
					if permanent(err) {
						break // the same request would fail again at once
					}
					continue
				}
				lat = append(lat, time.Since(t0))
				reqs++
				rows += n
				if miss {
					misses++
				}
			}
			mu.Lock()
			run.Latencies = append(run.Latencies, lat...)
			run.Requests += reqs
			run.Rows += rows
			run.Errors += errs
			run.Misses += misses
			mu.Unlock()
		}()
	}
	wg.Wait()
	run.Elapsed = time.Since(start)
	slices.Sort(run.Latencies)
	if e := firstErr.Load(); e != nil {
		run.FirstErr = *e
		if run.Requests == 0 {
			return run, fmt.Errorf("no request succeeded: %w", *e)
		}
	}
	return run, nil
}

// permanent reports errors that retrying the same request cannot cure
// (wrong table kind, bad input, a server without the feature).
func permanent(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnimplemented, connect.CodeInvalidArgument, connect.CodeNotFound,
		connect.CodeFailedPrecondition, connect.CodePermissionDenied, connect.CodeUnauthenticated:
		return true
	}
	return false
}

// Upsert runs the upsert benchmark: for each client count, that many
// clients upsert BatchRows rows of random keys per request for Duration.
func Upsert(ctx context.Context, cfg PKConfig) ([]PKRun, error) {
	copts, err := protocolOptions(cfg.Protocol, cfg.Token)
	if err != nil {
		return nil, err
	}
	if cfg.Keys <= 0 || cfg.BatchRows <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("--keys %d, --batch %d and --duration %v: want positive values", cfg.Keys, cfg.BatchRows, cfg.Duration)
	}
	if err := CreatePKTable(ctx, client.New(cfg.Server, copts...), cfg.Table, cfg.Buckets); err != nil {
		return nil, fmt.Errorf("create bench table: %w", err)
	}
	var out []PKRun
	version := int64(0)
	for _, n := range cfg.Clients {
		run, err := runWorkers(ctx, n, cfg.Duration, func(int) (worker, func(), error) {
			c := client.New(cfg.Server, copts...)
			// A few payloads per worker, made before the clock starts.
			const distinct = 16
			payloads := make([][]byte, distinct)
			for i := range payloads {
				version++
				rnd := rand.New(rand.NewSource(version))
				b := []byte{'['}
				for r := 0; r < cfg.BatchRows; r++ {
					if r > 0 {
						b = append(b, ',')
					}
					b = AppendPKRow(b, rnd.Int63n(int64(cfg.Keys)), version)
				}
				payloads[i] = append(b, ']')
			}
			i := 0
			return func(ctx context.Context, _ *rand.Rand) (int64, bool, error) {
				i++
				_, err := c.Upsert(ctx, cfg.Table, payloads[i%distinct], nil)
				return int64(cfg.BatchRows), false, err
			}, nil, nil
		})
		run.System = "fluss-node"
		out = append(out, run)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Lookup runs the lookup benchmark: it loads Keys keys, then for each
// client count runs that many clients doing 1-key lookups of random keys
// for Duration, each client with its own connection; with Batched, the
// same number of goroutines sharing one client.Lookuper; with Redis set,
// the same against redis GET.
func Lookup(ctx context.Context, cfg PKConfig) ([]PKRun, error) {
	copts, err := protocolOptions(cfg.Protocol, cfg.Token)
	if err != nil {
		return nil, err
	}
	if cfg.Keys <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("--keys %d and --duration %v: want positive values", cfg.Keys, cfg.Duration)
	}
	if cfg.BatchedInflight < 0 || cfg.BatchedInflight > 0 && !cfg.Batched {
		return nil, fmt.Errorf("--batched-inflight %d: want a positive number, with --batched", cfg.BatchedInflight)
	}
	if cfg.BatchedLinger != 0 && !cfg.Batched {
		return nil, fmt.Errorf("--batched-linger %v: only with --batched", cfg.BatchedLinger)
	}
	if err := CreatePKTable(ctx, client.New(cfg.Server, copts...), cfg.Table, cfg.Buckets); err != nil {
		return nil, fmt.Errorf("create bench table: %w", err)
	}
	if err := LoadPK(ctx, cfg); err != nil {
		return nil, err
	}
	if cfg.Redis != "" {
		if err := LoadRedis(ctx, cfg.Redis, cfg.Keys); err != nil {
			return nil, err
		}
	}
	var out []PKRun
	for _, n := range cfg.Clients {
		run, err := runWorkers(ctx, n, cfg.Duration, func(int) (worker, func(), error) {
			c := client.New(cfg.Server, copts...)
			var key []byte
			return func(ctx context.Context, rnd *rand.Rand) (int64, bool, error) {
				key = append(key[:0], `[{"id":`...)
				key = strconv.AppendInt(key, rnd.Int63n(int64(cfg.Keys)), 10)
				key = append(key, `}]`...)
				rows, err := c.Lookup(ctx, cfg.Table, key, nil)
				return 1, err == nil && string(rows) == "[null]", err
			}, nil, nil
		})
		run.System = "fluss-node"
		out = append(out, run)
		if err != nil {
			return out, err
		}
		if cfg.Batched {
			l := client.New(cfg.Server, copts...).NewLookuper(cfg.Table, client.LookuperOptions{MaxInflight: cfg.BatchedInflight, Linger: cfg.BatchedLinger})
			run, err = runWorkers(ctx, n, cfg.Duration, func(int) (worker, func(), error) {
				var key []byte
				return func(ctx context.Context, rnd *rand.Rand) (int64, bool, error) {
					key = append(key[:0], `{"id":`...)
					key = strconv.AppendInt(key, rnd.Int63n(int64(cfg.Keys)), 10)
					key = append(key, '}')
					row, err := l.Lookup(ctx, key)
					return 1, err == nil && row == nil, err
				}, nil, nil
			})
			run.System = "fluss-node, batched"
			out = append(out, run)
			if err != nil {
				return out, err
			}
		}
		if cfg.Redis == "" {
			continue
		}
		run, err = runWorkers(ctx, n, cfg.Duration, func(int) (worker, func(), error) {
			rc, err := DialRedis(ctx, cfg.Redis)
			if err != nil {
				return nil, nil, err
			}
			var key, val []byte
			return func(ctx context.Context, rnd *rand.Rand) (int64, bool, error) {
				key = strconv.AppendInt(key[:0], rnd.Int63n(int64(cfg.Keys)), 10)
				if d, ok := ctx.Deadline(); ok {
					rc.SetDeadline(d)
				}
				var found bool
				var err error
				val, found, err = rc.Get(val[:0], key)
				return 1, err == nil && !found, err
			}, func() { rc.Close() }, nil
		})
		run.System = "redis"
		out = append(out, run)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// PrintPK writes PK runs as a Markdown table.
func PrintPK(w io.Writer, what string, cfg PKConfig, runs []PKRun) {
	fmt.Fprintf(w, "| system | op | clients | rows/request | keys | requests/s | rows/s | p50 | p99 | p999 | errors | misses |\n")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range runs {
		secs := r.Elapsed.Seconds()
		perReq := 1
		op := what
		if what == "upsert" {
			perReq = cfg.BatchRows
		} else if r.System == "redis" {
			op = "GET"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %.0f | %.0f | %s | %s | %s | %d | %d |\n",
			r.System, op, r.Clients, perReq, cfg.Keys, float64(r.Requests)/secs, float64(r.Rows)/secs,
			r.Quantile(0.50).Round(time.Microsecond), r.Quantile(0.99).Round(time.Microsecond),
			r.Quantile(0.999).Round(time.Microsecond), r.Errors, r.Misses)
	}
	for _, r := range runs {
		if r.FirstErr != nil {
			fmt.Fprintf(w, "\nfirst error (%s, %d clients): %v\n", r.System, r.Clients, r.FirstErr)
		}
	}
}
