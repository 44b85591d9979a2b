// Package bench drives a running fluss-node through the Go client and
// reports whole-system throughput and latency (`fluss-node bench`). Results
// are printed as a table; nothing here asserts on time.
//
// Payloads are generated before the clock starts (realistic 10-column event
// rows from record.SampleRecord; Arrow payloads are compressed by the
// client, as the Go client does), so the figures measure the server and the
// network path, not the generator.
package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// ProduceConfig describes one produce run.
type ProduceConfig struct {
	Server      string        // base URL, e.g. http://127.0.0.1:9123, or a list (client.New); bytes on disk are the first server's
	Table       string        // "db.table"; (re)created with the sample schema
	Buckets     int           // buckets of the table
	Clients     int           // concurrent clients, each with its own writer id
	BatchRows   int           // rows per request
	Format      string        // "arrow" or "json"
	Token       string        // bearer token of a server with [auth] users ("" none)
	Protocol    string        // "proto" (Connect, HTTP/1.1; "" too), "grpc" (gRPC over shared h2c connections), "h2c" (Connect proto over shared h2c connections) or "json" (Connect JSON, rows inline, HTTP/1.1)
	Compression string        // arrow only: "zstd", "lz4" or "none"
	Duration    time.Duration // how long to send
	Wide        bool          // 20 columns instead of 10
	// Dictionary stores the low-cardinality strings (event_type, country)
	// dictionary-encoded.
	Dictionary bool
	// Direct sends each request straight to its bucket's leader (the
	// client's WithRouting); false sends all to Server, which forwards
	// what it does not lead.
	Direct bool
	// Appender makes the clients goroutines sharing one client.Appender,
	// each appending one JSON row at a time (Format "json", BatchRows 1):
	// rows that meet in flight share requests, as Fluss's append writer
	// batches them. Requests then counts acknowledged rows.
	Appender bool
	// Inflight is the Appender's MaxInflight (0: its default).
	Inflight int
	// Linger is the Appender's Linger (0: its default; negative: none).
	Linger time.Duration
	// Spread is how requests choose their bucket: "turn" ("" too) sends
	// worker w's i-th request to bucket (w + i·Clients) mod Buckets, so the
	// requests in flight are spread evenly (with Clients a multiple of
	// Buckets each client keeps to one bucket, and at Clients = Buckets no
	// two requests ever meet in a bucket); "random" draws each request's
	// bucket at random, as rows land in a table bucketed by a key.
	Spread string
}

// Result is the outcome of a run.
type Result struct {
	Requests  int64
	Rows      int64
	Bytes     int64 // request payload bytes (rows JSON or Arrow IPC)
	Errors    int64
	Elapsed   time.Duration
	Latencies []time.Duration // sorted
	DiskBytes int64           // growth of the server's log bytes, -1 if unknown
	FirstErr  error           // the first failed request's error, if any
}

// Quantile returns the q-quantile of the latencies.
func (r *Result) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(q * float64(len(r.Latencies)-1))
	return r.Latencies[i]
}

// Schema returns the bench table schema (10 columns, or 20 when wide);
// with dictionary, its event_type and country columns are stored
// dictionary-encoded.
func Schema(wide, dictionary bool) *record.Schema {
	s := record.SampleSchema()
	if wide {
		for _, c := range record.SampleSchema().Columns {
			c.Name += "_2"
			s.Columns = append(s.Columns, c)
		}
	}
	for i, c := range s.Columns {
		name, _ := strings.CutSuffix(c.Name, "_2")
		s.Columns[i].Dictionary = dictionary && (name == "event_type" || name == "country")
	}
	return s
}

// sampleRecord returns n rows of Schema(wide, dictionary), built with its
// Arrow schema (so that the client encodes the dictionary columns).
func sampleRecord(n int, seed int64, wide, dictionary bool) arrow.Record {
	rec := record.SampleRecord(n, seed)
	defer rec.Release()
	cols := rec.Columns()
	if wide {
		other := record.SampleRecord(n, seed+1)
		defer other.Release()
		cols = append(append([]arrow.Array{}, rec.Columns()...), other.Columns()...)
	}
	return array.NewRecordBatch(Schema(wide, dictionary).ArrowSchema(), cols, int64(n))
}

// CreateTable (re)creates the bench table of Schema(wide, dictionary) and
// waits for its leaders.
func CreateTable(ctx context.Context, c *client.Client, table string, buckets int, wide, dictionary bool, props map[string]string) error {
	s := Schema(wide, dictionary)
	cols := make([]*flussv1.Column, len(s.Columns))
	for i, col := range s.Columns {
		nullable := col.Nullable
		cols[i] = &flussv1.Column{Name: col.Name, Type: col.Type.String(), Nullable: &nullable, Dictionary: col.Dictionary}
	}
	return recreateTable(ctx, c, &flussv1.CreateTableRequest{
		Table:       table,
		Schema:      &flussv1.Schema{Columns: cols},
		BucketCount: int32(buckets),
		Properties:  props,
	})
}

// recreateTable drops req's table if it exists (creating its database if
// missing), creates it and waits until every bucket has a leader.
func recreateTable(ctx context.Context, c *client.Client, req *flussv1.CreateTableRequest) error {
	db, _, ok := strings.Cut(req.GetTable(), ".")
	if !ok {
		return fmt.Errorf("table %q: want db.table", req.GetTable())
	}
	if err := c.CreateDatabase(ctx, db, true); err != nil {
		return err
	}
	if err := c.DropTable(ctx, req.GetTable(), true); err != nil {
		return err
	}
	if _, err := c.CreateTable(ctx, req); err != nil {
		return err
	}
	for {
		layout, err := c.GetTableLayout(ctx, req.GetTable())
		if err == nil && len(layout) == int(req.GetBucketCount()) && !slices.ContainsFunc(layout, func(b *flussv1.BucketLayout) bool { return b.Leader == 0 }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// payloads pre-generates a few distinct request payloads.
func payloads(cfg ProduceConfig) ([][]byte, error) {
	const distinct = 8
	out := make([][]byte, distinct)
	for i := range out {
		rec := sampleRecord(cfg.BatchRows, int64(i+1), cfg.Wide, cfg.Dictionary)
		var err error
		switch cfg.Format {
		case "json":
			out[i] = record.AppendJSONRows(nil, rec, 0, int(rec.NumRows()), nil)
		case "arrow":
			out[i], err = encodeStream(rec, cfg.Compression)
		default:
			err = fmt.Errorf("format %q: want arrow or json", cfg.Format)
		}
		rec.Release()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Produce runs the produce benchmark.
func Produce(ctx context.Context, cfg ProduceConfig) (*Result, error) {
	copts, err := protocolOptions(cfg.Protocol, cfg.Token)
	if err != nil {
		return nil, err
	}
	data, err := payloads(cfg)
	if err != nil {
		return nil, err
	}
	send, err := produceSender(cfg, copts, data)
	if err != nil {
		return nil, err
	}
	admin := client.New(cfg.Server, copts...)
	if err := CreateTable(ctx, admin, cfg.Table, cfg.Buckets, cfg.Wide, cfg.Dictionary, nil); err != nil {
		return nil, fmt.Errorf("create bench table: %w", err)
	}
	before := logBytes(ctx, cfg.Server)

	var (
		res      Result
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
	)
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	for w := 0; w < cfg.Clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send := send(w)
			var lat []time.Duration
			var reqs, rows, sent, errs int64
			for i := 0; runCtx.Err() == nil; i++ {
				t0 := time.Now()
				// The request itself is not bound to the run's deadline:
				// requests in flight when the time is up complete.
				n, err := send(ctx, i)
				if err != nil {
					if runCtx.Err() == nil {
						errs++
						firstErr.CompareAndSwap(nil, &err)
					}
					continue
				}
				lat = append(lat, time.Since(t0))
				reqs++
				rows += int64(cfg.BatchRows)
				sent += int64(n)
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, lat...)
			res.Requests += reqs
			res.Rows += rows
			res.Bytes += sent
			res.Errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	slices.Sort(res.Latencies)
	res.DiskBytes = -1
	if after := logBytes(ctx, cfg.Server); before >= 0 && after >= 0 {
		res.DiskBytes = after - before
	}
	if e := firstErr.Load(); e != nil {
		res.FirstErr = *e
		if res.Requests == 0 {
			return &res, fmt.Errorf("no request succeeded: %w", *e)
		}
	}
	return &res, nil
}

// produceSender returns, per worker w, the function that sends the
// worker's i-th request and returns its payload bytes.
func produceSender(cfg ProduceConfig, copts []client.Option, data [][]byte) (func(w int) func(ctx context.Context, i int) (int, error), error) {
	opts := copts
	if cfg.Direct {
		opts = append(slices.Clip(copts), client.WithRouting())
	}
	if cfg.Clients <= 0 || cfg.BatchRows <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("--clients %d, --batch %d and --duration %v: want positive values", cfg.Clients, cfg.BatchRows, cfg.Duration)
	}
	if cfg.Inflight < 0 || cfg.Inflight > 0 && !cfg.Appender {
		return nil, fmt.Errorf("--appender-inflight %d: want a positive number, with --appender", cfg.Inflight)
	}
	if cfg.Linger != 0 && !cfg.Appender {
		return nil, fmt.Errorf("--appender-linger %v: only with --appender", cfg.Linger)
	}
	if cfg.Spread != "" && cfg.Spread != "turn" && cfg.Spread != "random" {
		return nil, fmt.Errorf("--spread %q: want turn or random", cfg.Spread)
	}
	if cfg.Appender {
		if cfg.Spread != "" && cfg.Spread != "turn" {
			return nil, fmt.Errorf("--spread: with --appender the shared client chooses buckets")
		}
		if cfg.Format != "json" || cfg.BatchRows != 1 {
			return nil, fmt.Errorf("--appender sends single JSON rows: want --format json --batch 1")
		}
		a := client.New(cfg.Server, opts...).NewAppender(cfg.Table, client.AppenderOptions{MaxInflight: cfg.Inflight, Linger: cfg.Linger})
		return func(w int) func(context.Context, int) (int, error) {
			return func(ctx context.Context, i int) (int, error) {
				row := data[(w+i)%len(data)]
				row = row[1 : len(row)-1] // the one object of "[{...}]"
				return len(row), a.Append(ctx, row)
			}
		}, nil
	}
	return func(w int) func(context.Context, int) (int, error) {
		// Each worker has its own client and so its own writer id; the
		// HTTP client (and so the connections) is shared only over h2c
		// ("grpc", "h2c"), whose HTTP/2 connections multiplex the
		// workers' requests.
		c := client.New(cfg.Server, opts...)
		bucketOf := bucketChooser(cfg, w)
		return func(ctx context.Context, i int) (int, error) {
			p := data[(w+i)%len(data)]
			bucket := bucketOf(i)
			req := &flussv1.AppendRequest{Table: cfg.Table, Bucket: &bucket}
			if cfg.Format == "json" {
				req.Rows = p
			} else {
				req.Arrow = p
			}
			_, err := c.AppendRequest(ctx, req)
			return len(p), err
		}
	}, nil
}

// bucketChooser returns the bucket of worker w's i-th request by
// cfg.Spread.
func bucketChooser(cfg ProduceConfig, w int) func(i int) int32 {
	if cfg.Spread == "random" {
		rnd := rand.New(rand.NewPCG(uint64(w), 0))
		return func(int) int32 { return rnd.Int32N(int32(cfg.Buckets)) }
	}
	return func(i int) int32 { return int32((w + i*cfg.Clients) % cfg.Buckets) }
}

// protocolOptions maps ProduceConfig.Protocol to client options.
// with the bearer token of servers with [auth] users ("" none).
func protocolOptions(protocol, token string) ([]client.Option, error) {
	opts := []client.Option{client.WithToken(token)}
	switch protocol {
	case "", "proto":
		return opts, nil
	case "json":
		return append(opts, client.WithJSON()), nil
	case "grpc":
		// One transport for every worker: HTTP/2 multiplexes their
		// requests over a few connections instead of one each.
		return append(opts, client.WithGRPC(), client.WithHTTPClient(client.DefaultHTTPClient(true))), nil
	case "h2c":
		// Connect proto, but over shared cleartext HTTP/2 connections.
		return append(opts, client.WithHTTPClient(client.DefaultHTTPClient(true))), nil
	}
	return nil, fmt.Errorf("protocol %q: want proto, grpc, h2c or json", protocol)
}

// logBytes reads fluss_log_size_bytes from the server's /metrics (-1 if
// it cannot).
func logBytes(ctx context.Context, server string) int64 {
	server, _, _ = strings.Cut(server, ",") // a list of servers: the first
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/ ")+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fluss_log_size_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int64(f)
			}
		}
	}
	return -1
}

// PrintProduce writes one result as a Markdown table.
func PrintProduce(w io.Writer, cfg ProduceConfig, r *Result) {
	secs := r.Elapsed.Seconds()
	disk := "n/a"
	if r.DiskBytes >= 0 && r.Rows > 0 {
		disk = fmt.Sprintf("%.1f", float64(r.DiskBytes)/float64(r.Rows))
	}
	fmt.Fprintln(w, "| format | compression | clients | rows/request | buckets | rows/s | requests/s | MB/s | p50 | p99 | errors | disk bytes/row |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	comp := cfg.Compression
	if cfg.Format == "json" {
		comp = "server zstd"
		switch {
		case cfg.Appender:
			comp = "server zstd from 32 rows/request"
		case cfg.BatchRows < 32:
			comp = "none (< 32 rows)" // the server stores tiny batches uncompressed
		}
	}
	format := cfg.Format
	if cfg.Protocol != "" && cfg.Protocol != "proto" {
		format += " over " + cfg.Protocol
	}
	if cfg.Appender {
		format += ", one shared Appender (requests/s: acknowledged appends)"
	}
	if cfg.Spread == "random" {
		format += ", buckets at random"
	}
	fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %.0f | %.0f | %.1f | %s | %s | %d | %s |\n",
		format, comp, cfg.Clients, cfg.BatchRows, cfg.Buckets,
		float64(r.Rows)/secs, float64(r.Requests)/secs, float64(r.Bytes)/secs/1e6,
		r.Quantile(0.50).Round(time.Microsecond), r.Quantile(0.99).Round(time.Microsecond), r.Errors, disk)
	if r.FirstErr != nil {
		fmt.Fprintf(w, "\nfirst error: %v\n", r.FirstErr)
	}
}

// FetchConfig describes a fetch run: the table is loaded with Rows rows of
// the wide (20-column) schema, then read back whole and with Columns only.
type FetchConfig struct {
	Server  string
	Token   string // as ProduceConfig.Token
	Table   string
	Buckets int
	Rows    int
	Columns []string // the projection to compare with a full read
	Format  string   // "arrow" or "json"
	// Dictionary is ProduceConfig.Dictionary.
	Dictionary bool
}

// FetchResult compares a full read with a projected one.
type FetchResult struct {
	Rows                    int64
	FullBytes, ProjBytes    int64
	FullElapsed, ProjElapse time.Duration
}

// Fetch runs the fetch benchmark.
func Fetch(ctx context.Context, cfg FetchConfig) (*FetchResult, error) {
	if cfg.Rows <= 0 {
		return nil, fmt.Errorf("--rows %d: want a positive number", cfg.Rows)
	}
	c := client.New(cfg.Server, client.WithToken(cfg.Token))
	if err := CreateTable(ctx, c, cfg.Table, cfg.Buckets, true, cfg.Dictionary, nil); err != nil {
		return nil, fmt.Errorf("create bench table: %w", err)
	}
	const batch = 2000
	for sent, seed := 0, int64(1); sent < cfg.Rows; seed++ {
		n := min(batch, cfg.Rows-sent)
		rec := sampleRecord(n, seed, true, cfg.Dictionary)
		_, err := c.AppendRecord(ctx, cfg.Table, int32(int(seed)%cfg.Buckets), rec)
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		sent += n
	}
	format := flussv1.Format_ARROW
	if cfg.Format == "json" {
		format = flussv1.Format_JSON
	}
	readAll := func(columns []string) (rows, bytes int64, elapsed time.Duration, err error) {
		start := time.Now()
		for b := 0; b < cfg.Buckets; b++ {
			offset := int64(0)
			for {
				resp, err := c.Fetch(ctx, &flussv1.FetchRequest{
					Table: cfg.Table, Bucket: int32(b), Offset: offset, Columns: columns,
					Format: format, MaxBytes: 8 << 20,
				})
				if err != nil {
					return 0, 0, 0, err
				}
				bytes += int64(len(resp.Arrow) + len(resp.Rows))
				rows += resp.NextOffset - offset
				offset = resp.NextOffset
				if offset >= resp.HighWatermark {
					break
				}
			}
		}
		return rows, bytes, time.Since(start), nil
	}
	var r FetchResult
	var err error
	if r.Rows, r.FullBytes, r.FullElapsed, err = readAll(nil); err != nil {
		return nil, fmt.Errorf("full fetch: %w", err)
	}
	var rows int64
	if rows, r.ProjBytes, r.ProjElapse, err = readAll(cfg.Columns); err != nil {
		return nil, fmt.Errorf("projected fetch: %w", err)
	}
	if rows != r.Rows {
		return nil, errors.New("projected read saw a different number of rows")
	}
	return &r, nil
}

// PrintFetch writes a fetch result as a Markdown table.
func PrintFetch(w io.Writer, cfg FetchConfig, r *FetchResult) {
	fmt.Fprintln(w, "| read | columns | rows | bytes moved | rows/s | MB/s |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	fmt.Fprintf(w, "| full | 20 | %d | %d | %.0f | %.1f |\n", r.Rows, r.FullBytes,
		float64(r.Rows)/r.FullElapsed.Seconds(), float64(r.FullBytes)/r.FullElapsed.Seconds()/1e6)
	fmt.Fprintf(w, "| projected | %s | %d | %d | %.0f | %.1f |\n", strings.Join(cfg.Columns, ","), r.Rows, r.ProjBytes,
		float64(r.Rows)/r.ProjElapse.Seconds(), float64(r.ProjBytes)/r.ProjElapse.Seconds()/1e6)
	fmt.Fprintf(w, "\nprojected/full: %.1f%% of the bytes, %.1fx faster (%s format)\n",
		100*float64(r.ProjBytes)/float64(r.FullBytes), r.FullElapsed.Seconds()/r.ProjElapse.Seconds(), cfg.Format)
}

// encodeStream encodes rec as an Arrow IPC stream with client-side buffer
// compression and dictionary encoding, as a producer would send it.
func encodeStream(rec arrow.Record, compression string) ([]byte, error) {
	var codec arrowipc.Codec
	switch compression {
	case "zstd":
		codec = arrowipc.CodecZSTD
	case "lz4":
		codec = arrowipc.CodecLZ4Frame
	case "none", "":
		codec = arrowipc.CodecNone
	default:
		return nil, fmt.Errorf("compression %q: want zstd, lz4 or none", compression)
	}
	stored, err := record.StoredRecord(rec) // dictionary columns as the table stores them
	if err != nil {
		return nil, err
	}
	defer stored.Release()
	return arrowipc.EncodeStream(nil, stored, codec, 0)
}
