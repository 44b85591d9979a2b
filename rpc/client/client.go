package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/fluss-node/fluss-node/logstore/record"
	"github.com/fluss-node/fluss-node/logstore/record/arrowipc"
	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
	"github.com/fluss-node/fluss-node/rpc"
)

// Client talks to one fluss-node server. It is safe for concurrent use.
type Client struct {
	admin flussv1connect.AdminServiceClient
	write flussv1connect.WriteServiceClient
	read  flussv1connect.ReadServiceClient

	writerID int64      // the first writer's id (WriterID)
	writers  writerPool // idle writers; see withWriter
	retry    Retry
	route    *router // nil unless WithRouting
}

// Retry bounds how calls that are safe to repeat are retried when the
// server answers `unavailable` (no leader yet) or the connection breaks
// under the call (see retryable): at most Attempts tries in
// all, sleeping Base, 2×Base, ... up to Max between them, and never past the
// context's deadline.
type Retry struct {
	Attempts int
	Base     time.Duration
	Max      time.Duration
}

type options struct {
	httpClient connect.HTTPClient
	protocol   string // "proto" (default), "json", "grpc"
	writerID   int64
	retry      Retry
	connect    []connect.ClientOption

	routing      bool          // WithRouting
	routeRefresh time.Duration // cache lifetime of a table's leaders
}

// Option configures New.
type Option func(*options)

// WithHTTPClient sets the HTTP client (default: a pooled HTTP/1.1 client,
// or cleartext HTTP/2 for WithGRPC).
func WithHTTPClient(h connect.HTTPClient) Option { return func(o *options) { o.httpClient = h } }

// WithJSON makes the client speak Connect JSON (rows inline) instead of
// Connect proto.
func WithJSON() Option { return func(o *options) { o.protocol = "json" } }

// WithGRPC makes the client speak gRPC over cleartext HTTP/2.
func WithGRPC() Option { return func(o *options) { o.protocol = "grpc" } }

// WithWriterID fixes the idempotent writer id (default: random per client).
func WithWriterID(id int64) Option { return func(o *options) { o.writerID = id } }

// WithRetry sets the retry policy of idempotent calls (default 8 attempts,
// 50 ms doubling up to 2 s). Attempts 1 disables retries.
func WithRetry(r Retry) Option { return func(o *options) { o.retry = r } }

// WithToken authenticates every call with "Authorization: Bearer token",
// for servers with [auth] users (see config.example.toml).
func WithToken(token string) Option {
	return func(o *options) {
		if token != "" {
			o.connect = append(o.connect, connect.WithInterceptors(bearer("Bearer "+token)))
		}
	}
}

// bearer sets the Authorization header of every request.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(b))
		return next(ctx, req)
	}
}

func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", string(b))
		return conn
	}
}

func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// WithConnectOptions passes extra connect-go client options (interceptors,
// compression, ...).
func WithConnectOptions(opts ...connect.ClientOption) Option {
	return func(o *options) { o.connect = append(o.connect, opts...) }
}

// New returns a client of the server at baseURL ("http://127.0.0.1:9123";
// a bare "host:port" gets "http://"; "https://" for a server with [tls],
// whose certificate is checked against the system's roots, or the file
// $SSL_CERT_FILE names). Every call goes to baseURL, which forwards to the
// bucket leader as needed, unless WithRouting.
//
// baseURL may list several servers of one cluster, separated by commas
// ("10.0.0.1:9123,10.0.0.2:9123", as Kafka's bootstrap.servers): calls go
// to one of them until it fails. A server that refuses the connection is
// passed over within the call, one that answers `unavailable` by the
// retry (see seedList). A list that does not parse makes every call fail
// with an error naming the bad entry.
func New(baseURL string, opts ...Option) *Client {
	o := options{protocol: "proto", retry: Retry{Attempts: 8, Base: 50 * time.Millisecond, Max: 2 * time.Second}}
	for _, f := range opts {
		f(&o)
	}
	if o.httpClient == nil {
		o.httpClient = defaultHTTPClient(o.protocol == "grpc")
	}
	switch seeds, err := parseSeeds(baseURL); {
	case err != nil: // every call fails with it, before anything is sent
		o.httpClient = &seedList{err: connect.NewError(connect.CodeInvalidArgument, err)}
		baseURL = "http://bad-server-list.invalid" // a URL the generated clients accept
	case len(seeds) > 1:
		o.httpClient = newSeedList(o.httpClient, seeds)
		baseURL = seeds[0].String()
	default:
		baseURL = seeds[0].String()
	}
	if o.writerID == 0 {
		o.writerID = randomWriterID()
	}
	if o.retry.Attempts < 1 {
		o.retry.Attempts = 1
	}
	// Arrow payloads are compressed per buffer already and JSON rows are
	// small: gzip of responses cost more CPU than it saved (a full fetch ran
	// at ~20 MB/s). Callers may add it back with WithConnectOptions.
	copts := []connect.ClientOption{connect.WithAcceptCompression("gzip", nil, nil)}
	copts = append(copts, o.connect...)
	switch o.protocol {
	case "json":
		copts = append(copts, connect.WithCodec(rpc.Codecs()[0])) // "json", rows inline
	case "grpc":
		copts = append(copts, connect.WithGRPC())
	}
	c := &Client{
		admin:    flussv1connect.NewAdminServiceClient(o.httpClient, baseURL, copts...),
		write:    flussv1connect.NewWriteServiceClient(o.httpClient, baseURL, copts...),
		read:     flussv1connect.NewReadServiceClient(o.httpClient, baseURL, copts...),
		writerID: o.writerID,
		retry:    o.retry,
	}
	c.writers.idle = []*writer{{id: o.writerID}}
	c.initRouting(&o, baseURL, func(base string) *endpoint {
		return &endpoint{
			admin: flussv1connect.NewAdminServiceClient(o.httpClient, base, copts...),
			write: flussv1connect.NewWriteServiceClient(o.httpClient, base, copts...),
			read:  flussv1connect.NewReadServiceClient(o.httpClient, base, copts...),
		}
	})
	return c
}

// DefaultHTTPClient returns a new HTTP client as New makes one: HTTP/1.1,
// or cleartext HTTP/2 (h2c, as gRPC needs) when h2c is true. Share one
// between clients (WithHTTPClient) to share its connections.
func DefaultHTTPClient(h2c bool) connect.HTTPClient { return defaultHTTPClient(h2c) }

func defaultHTTPClient(h2c bool) connect.HTTPClient {
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		// Connect negotiates compression itself; without this net/http
		// would ask for gzip on its own and decompress transparently.
		DisableCompression: true,
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		p.SetHTTP2(true) // an https:// server: HTTP/2 over TLS
		t.Protocols = &p
		return &http.Client{Transport: t}
	}
	return newUnaryHTTP(&http.Client{Transport: inMemoryBody{t}})
}

// inMemoryBodyMax bounds the request bodies inMemoryBody copies.
const inMemoryBodyMax = 64 << 10

// inMemoryBody hands small request bodies to the HTTP/1.1 transport as a
// bytes.Reader. net/http flushes the request headers on their own (one
// extra write syscall per request here, one extra read on the server)
// unless the body is one of the in-memory readers it knows; connect-go's
// unary body is not. Copying a body of a few hundred bytes costs far less
// than the syscalls. Larger bodies go through untouched.
type inMemoryBody struct{ rt http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t inMemoryBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength <= 0 || r.ContentLength > inMemoryBodyMax {
		return t.rt.RoundTrip(r)
	}
	buf := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, buf)
	_ = r.Body.Close() // a RoundTripper closes the body, error or not
	if err != nil {
		return nil, fmt.Errorf("read request body of %d bytes: %w", r.ContentLength, err)
	}
	// A RoundTripper must not modify the request: a shallow copy with
	// another body.
	r2 := new(http.Request)
	*r2 = *r
	r2.Body = io.NopCloser(bytes.NewReader(buf))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf)), nil }
	return t.rt.RoundTrip(r2)
}

func randomWriterID() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		id := int64(binary.LittleEndian.Uint64(b[:]) >> 1) // positive
		if id != 0 {
			return id
		}
	}
}

// JSONArray joins JSON values into one JSON array, the form of the rows
// and keys of Append, Upsert, Delete and Lookup.
func JSONArray(vals [][]byte) []byte {
	size := 2
	for _, v := range vals {
		size += len(v) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, v := range vals {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, v...)
	}
	return append(out, ']')
}

// WriterID is the idempotent writer id this client stamps on its writes
// while it makes one at a time (WithWriterID sets it). Writes made
// concurrently take further writer ids of their own; see withWriter.
func (c *Client) WriterID() int64 { return c.writerID }

// A writer is an idempotent writer id and the last batch sequence it used.
type writer struct {
	id  int64
	seq int32
}

// writerPool holds the writers no write is using.
type writerPool struct {
	mu   sync.Mutex
	idle []*writer // a stack: a client used by one goroutine keeps one id
}

// withWriter runs one write (every attempt of it) as the next batch sequence of
// a writer no other write is using meanwhile. The server stores a writer's
// batches in each bucket in sequence order and refuses a sequence older
// than the newest it holds (Kafka's idempotent producer rule), and
// requests sent from several goroutines race on their connections; so one
// writer never has two writes out. A writer whose sequence would wrap is
// replaced by a new id.
func (c *Client) withWriter(f func(writerID int64, seq int32) error) error {
	p := &c.writers
	p.mu.Lock()
	var w *writer
	if n := len(p.idle); n > 0 {
		w, p.idle = p.idle[n-1], p.idle[:n-1]
	} else {
		w = &writer{id: randomWriterID()}
	}
	p.mu.Unlock()
	if w.seq == math.MaxInt32 {
		w = &writer{id: randomWriterID()}
	}
	w.seq++
	err := f(w.id, w.seq)
	p.mu.Lock()
	p.idle = append(p.idle, w)
	p.mu.Unlock()
	return err
}

// Admin, Write and Read expose the generated clients for calls the helpers
// do not cover.
func (c *Client) Admin() flussv1connect.AdminServiceClient { return c.admin }

// Write returns the generated WriteService client.
func (c *Client) Write() flussv1connect.WriteServiceClient { return c.write }

// Read returns the generated ReadService client.
func (c *Client) Read() flussv1connect.ReadServiceClient { return c.read }

// do runs call, retrying while the server answers `unavailable`.
func (c *Client) do(ctx context.Context, call func() error) error {
	delay := c.retry.Base
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || !retryable(err) || attempt >= c.retry.Attempts {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up retrying: %w)", err, ctx.Err())
		case <-t.C:
		}
		if delay *= 2; c.retry.Max > 0 && delay > c.retry.Max {
			delay = c.retry.Max
		}
	}
}

// retried sends req with method, again while the answer is `unavailable`
// (do). Each attempt sends it through the service client pick returns (the
// seed's; with routing a bucket leader's, or another node's while the seed
// is avoided) and reports the attempt's error to the routing.
func retried[S, Req, Res any](ctx context.Context, c *Client, pick func(context.Context) (S, func(error)),
	method func(S, context.Context, *connect.Request[Req]) (*connect.Response[Res], error), req *Req) (*Res, error) {
	var out *Res
	err := c.do(ctx, func() error {
		sc, done := pick(ctx)
		res, err := method(sc, ctx, connect.NewRequest(req))
		if done != nil {
			done(err)
		}
		if err == nil {
			out = res.Msg
		}
		return err
	})
	return out, err
}

// retryable tells whether err may pass with another attempt: the server
// was unavailable (no leader yet, a node restarting) or the connection
// broke under the call (reset by the peer, or the answer cut off; connect
// reports a reset as `canceled`), and not because the server's certificate
// failed the check, which no retry changes. Writes carry their writer id
// and sequence, so a retry of one the server did apply is not stored
// twice.
func retryable(err error) bool {
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) {
		return false
	}
	return connect.CodeOf(err) == connect.CodeUnavailable ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF)
}

// ---------------------------------------------------------------- admin

// CreateDatabase creates a database.
func (c *Client) CreateDatabase(ctx context.Context, name string, ignoreIfExists bool) error {
	_, err := c.admin.CreateDatabase(ctx, connect.NewRequest(&flussv1.CreateDatabaseRequest{Name: name, IgnoreIfExists: ignoreIfExists}))
	return err
}

// DropDatabase drops a database (cascade: with its tables).
func (c *Client) DropDatabase(ctx context.Context, name string, ignoreIfNotExists, cascade bool) error {
	_, err := c.admin.DropDatabase(ctx, connect.NewRequest(&flussv1.DropDatabaseRequest{Name: name, IgnoreIfNotExists: ignoreIfNotExists, Cascade: cascade}))
	return err
}

// ListDatabases lists the databases.
func (c *Client) ListDatabases(ctx context.Context) ([]string, error) {
	res, err := retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.ListDatabases, &flussv1.ListDatabasesRequest{})
	return res.GetDatabases(), err
}

// CreateTable creates the table spec describes and returns its id.
func (c *Client) CreateTable(ctx context.Context, spec *flussv1.CreateTableRequest) (int64, error) {
	res, err := c.admin.CreateTable(ctx, connect.NewRequest(spec))
	if err != nil {
		return 0, err
	}
	return res.Msg.GetTableId(), nil
}

// CreatePartition creates the partition of a partitioned table ("db.table")
// with one value per partition key and returns it.
func (c *Client) CreatePartition(ctx context.Context, table string, values map[string]string, ignoreIfExists bool) (*flussv1.Partition, error) {
	res, err := c.admin.CreatePartition(ctx, connect.NewRequest(&flussv1.CreatePartitionRequest{Table: table, Values: values, IgnoreIfExists: ignoreIfExists}))
	if err != nil {
		return nil, err
	}
	if ps := res.Msg.GetPartitions(); len(ps) > 0 {
		return ps[0], nil
	}
	return nil, fmt.Errorf("create partition of %s: the server answered no partition", table)
}

// DropPartition drops the partition of a table with the given values, and
// its data.
func (c *Client) DropPartition(ctx context.Context, table string, values map[string]string, ignoreIfNotExists bool) error {
	_, err := c.admin.DropPartition(ctx, connect.NewRequest(&flussv1.DropPartitionRequest{Table: table, Values: values, IgnoreIfNotExists: ignoreIfNotExists}))
	return err
}

// ListPartitions lists a partitioned table's partitions by name; with
// values, only those whose values include them.
func (c *Client) ListPartitions(ctx context.Context, table string, values map[string]string) ([]*flussv1.Partition, error) {
	res, err := retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.ListPartitions, &flussv1.ListPartitionsRequest{Table: table, Values: values})
	return res.GetPartitions(), err
}

// GetTable describes a table ("db.table").
func (c *Client) GetTable(ctx context.Context, table string) (*flussv1.GetTableResponse, error) {
	return retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.GetTable, &flussv1.GetTableRequest{Table: table})
}

// ListTables lists the tables of a database.
func (c *Client) ListTables(ctx context.Context, database string) ([]string, error) {
	res, err := retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.ListTables, &flussv1.ListTablesRequest{Database: database})
	return res.GetTables(), err
}

// DropTable drops a table.
func (c *Client) DropTable(ctx context.Context, table string, ignoreIfNotExists bool) error {
	_, err := c.admin.DropTable(ctx, connect.NewRequest(&flussv1.DropTableRequest{Table: table, IgnoreIfNotExists: ignoreIfNotExists}))
	return err
}

// AddColumns appends nullable columns to a log table and returns the new
// schema version. Not retried: a retry after a lost answer would fail with
// "already exists".
func (c *Client) AddColumns(ctx context.Context, table string, cols ...*flussv1.Column) (int32, error) {
	res, err := c.admin.AlterTable(ctx, connect.NewRequest(&flussv1.AlterTableRequest{Table: table, AddColumns: cols}))
	if err != nil {
		return 0, err
	}
	return res.Msg.GetSchemaId(), nil
}

// AlterTable sends an AlterTableRequest as it is and returns the table's
// schema version after it. Sent once, not retried.
func (c *Client) AlterTable(ctx context.Context, req *flussv1.AlterTableRequest) (*flussv1.AlterTableResponse, error) {
	res, err := c.admin.AlterTable(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// SetTableProperties sets and resets table properties that may change
// after the table is created. Sent once, not retried.
func (c *Client) SetTableProperties(ctx context.Context, table string, set map[string]string, reset ...string) error {
	_, err := c.admin.AlterTable(ctx, connect.NewRequest(&flussv1.AlterTableRequest{Table: table, SetProperties: set, ResetProperties: reset}))
	return err
}

// ListOffsets resolves spec for the given buckets (none: every bucket).
func (c *Client) ListOffsets(ctx context.Context, table string, spec flussv1.ListOffsetsRequest_Spec, timestampMs int64, buckets ...int32) ([]*flussv1.BucketOffset, error) {
	res, err := retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.ListOffsets,
		&flussv1.ListOffsetsRequest{Table: table, Spec: spec, TimestampMs: timestampMs, Buckets: buckets})
	return res.GetOffsets(), err
}

// GetTableLayout lists the buckets of a table with their leaders.
func (c *Client) GetTableLayout(ctx context.Context, table string) ([]*flussv1.BucketLayout, error) {
	return c.getTableLayout(ctx, &flussv1.GetTableLayoutRequest{Table: table})
}

// GetTableLayoutInSync is GetTableLayout with each bucket's in-sync
// replicas, as its leader counts them (one call to every leader's node).
func (c *Client) GetTableLayoutInSync(ctx context.Context, table string) ([]*flussv1.BucketLayout, error) {
	return c.getTableLayout(ctx, &flussv1.GetTableLayoutRequest{Table: table, InSync: true})
}

func (c *Client) getTableLayout(ctx context.Context, req *flussv1.GetTableLayoutRequest) ([]*flussv1.BucketLayout, error) {
	res, err := retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.GetTableLayout, req)
	return res.GetBuckets(), err
}

// DescribeCluster describes the cluster.
func (c *Client) DescribeCluster(ctx context.Context) (*flussv1.DescribeClusterResponse, error) {
	return retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.DescribeCluster, &flussv1.DescribeClusterRequest{})
}

// ---------------------------------------------------------------- write

// NoBucket lets the server choose buckets (by bucket key, or rotating).
const NoBucket int32 = -1

// Append appends rows, a JSON array of objects (`[{"id":1},...]`), to a log
// table. The write carries this client's writer id and the next batch
// sequence and is retried on `unavailable` with the same pair, so a retry
// is never stored twice.
func (c *Client) Append(ctx context.Context, table string, rowsJSON []byte) ([]*flussv1.AppendResult, error) {
	return c.AppendRequest(ctx, &flussv1.AppendRequest{Table: table, Rows: rowsJSON})
}

// AppendArrow appends a complete Arrow IPC stream (schema message, then
// record batches) to bucket (NoBucket: the server splits by bucket key).
// Send one bucket's rows per call on multi-bucket tables: the server then
// stores the client's (compressed) batches as they are.
func (c *Client) AppendArrow(ctx context.Context, table string, bucket int32, stream []byte) ([]*flussv1.AppendResult, error) {
	req := &flussv1.AppendRequest{Table: table, Arrow: stream}
	if bucket >= 0 {
		req.Bucket = &bucket
	}
	return c.AppendRequest(ctx, req)
}

// SmallBatchRows: AppendRecord sends batches with fewer rows uncompressed,
// as the server stores its own. Compressing a handful of values saves a
// few bytes and costs a codec set-up per buffer on both sides.
const SmallBatchRows = 32

// AppendRecord encodes rec as an Arrow IPC stream with ZSTD buffer
// compression (none under SmallBatchRows rows) and appends it like
// AppendArrow.
func (c *Client) AppendRecord(ctx context.Context, table string, bucket int32, rec arrow.Record) ([]*flussv1.AppendResult, error) {
	stream, err := EncodeArrowStream(nil, rec, true)
	if err != nil {
		return nil, err
	}
	return c.AppendArrow(ctx, table, bucket, stream)
}

// EncodeArrowStream appends rec as a complete Arrow IPC stream to dst,
// compressing buffers with ZSTD (level 3, literals entropy-coded as by the
// reference zstd) when zstd is set and rec has at least SmallBatchRows
// rows. Columns that rec's schema marks dictionary-encoded (a record built
// with a table's record.Schema.ArrowSchema) are encoded as the server
// stores them, which then keeps the batch as it is.
func EncodeArrowStream(dst []byte, rec arrow.Record, zstd bool) ([]byte, error) {
	codec := arrowipc.CodecNone
	if zstd && rec.NumRows() >= SmallBatchRows {
		codec = arrowipc.CodecZSTD
	}
	stored, err := record.StoredRecord(rec)
	if err != nil {
		return dst, fmt.Errorf("encode Arrow stream: %w", err)
	}
	defer stored.Release()
	out, err := arrowipc.EncodeStream(dst, stored, codec, 0)
	if err != nil {
		return dst, fmt.Errorf("encode Arrow stream: %w", err)
	}
	return out, nil
}

// AppendRequest sends req with a writer id of this client and its next
// batch sequence (unless req already carries a writer id), retrying on
// `unavailable` with the same pair.
func (c *Client) AppendRequest(ctx context.Context, req *flussv1.AppendRequest) ([]*flussv1.AppendResult, error) {
	if req.WriterId == 0 {
		return c.appendAs(ctx, req)
	}
	return c.appendOnce(ctx, req)
}

// appendAs sends req as the next batch of a writer of its own (withWriter).
func (c *Client) appendAs(ctx context.Context, req *flussv1.AppendRequest) (out []*flussv1.AppendResult, err error) {
	err = c.withWriter(func(id int64, seq int32) error {
		req.WriterId, req.BatchSequence = id, seq
		out, err = c.appendOnce(ctx, req)
		return err
	})
	return out, err
}

// appendOnce sends req with the writer id and sequence it carries.
func (c *Client) appendOnce(ctx context.Context, req *flussv1.AppendRequest) ([]*flussv1.AppendResult, error) {
	pick := func(ctx context.Context) (flussv1connect.WriteServiceClient, func(error)) {
		return c.writeFor(ctx, req.Table, req.Partition, req.Bucket)
	}
	res, err := retried(ctx, c, pick, flussv1connect.WriteServiceClient.Append, req)
	return res.GetResults(), err
}

// ---------------------------------------------------------------- read

// Fetch reads one bucket from req.Offset.
func (c *Client) Fetch(ctx context.Context, req *flussv1.FetchRequest) (*flussv1.FetchResponse, error) {
	pick := func(ctx context.Context) (flussv1connect.ReadServiceClient, func(error)) {
		return c.readFor(ctx, req.Table, req.Partition, req.Bucket)
	}
	return retried(ctx, c, pick, flussv1connect.ReadServiceClient.Fetch, req)
}

// ErrStop may be returned by a Scan callback to end the scan without error.
var ErrStop = errors.New("stop scan")

// Scan streams req's results to fn until the server ends the stream (not
// with follow), fn returns an error (ErrStop ends it cleanly) or ctx ends.
// A stream that fails as `unavailable` before its first message (a bucket
// without a leader yet, as just after a restart) is retried like other
// calls; once fn has seen a message, errors are returned as they are,
// except for a following scan, which resumes (see follow).
func (c *Client) Scan(ctx context.Context, req *flussv1.ScanRequest, fn func(*flussv1.ScanResponse) error) error {
	if req.GetFollow() {
		pos, err := c.scanStart(ctx, req)
		if err != nil {
			return err
		}
		if pos != nil {
			return c.follow(ctx, req, pos, fn)
		}
	}
	_, err := c.scanRetried(ctx, req, fn)
	return err
}

// scanRetried runs one scan, retried (do) while it fails before fn has seen
// a message. seen reports whether fn saw one; err is then how the stream
// ended, which is not retried.
func (c *Client) scanRetried(ctx context.Context, req *flussv1.ScanRequest, fn func(*flussv1.ScanResponse) error) (seen bool, err error) {
	var after error
	err = c.do(ctx, func() error {
		err := c.scanOnce(ctx, req, fn, &seen)
		if seen {
			after = err
			return nil
		}
		return err
	})
	if seen {
		return true, after
	}
	return false, err
}

// scanStart resolves where a following scan starts in each of its
// buckets: the request's offsets, or ListOffsets of its start (what the
// server would resolve). It returns nil for a scan of every partition of a
// partitioned table: new partitions are found by the server's scan alone,
// so such a scan is not resumed.
func (c *Client) scanStart(ctx context.Context, req *flussv1.ScanRequest) ([]*flussv1.BucketOffset, error) {
	if req.GetFrom() == flussv1.ScanRequest_OFFSETS {
		pos := make([]*flussv1.BucketOffset, len(req.GetOffsets()))
		for i, o := range req.GetOffsets() {
			pos[i] = &flussv1.BucketOffset{Partition: o.GetPartition(), Bucket: o.GetBucket(), Offset: o.GetOffset()}
		}
		return pos, nil
	}
	if req.GetPartition() == "" {
		t, err := c.GetTable(ctx, layoutName(req.GetTable()))
		if err != nil {
			return nil, err
		}
		if len(t.GetPartitionKeys()) > 0 {
			return nil, nil
		}
	}
	var spec flussv1.ListOffsetsRequest_Spec
	switch req.GetFrom() {
	case flussv1.ScanRequest_EARLIEST:
		spec = flussv1.ListOffsetsRequest_EARLIEST
	case flussv1.ScanRequest_LATEST:
		spec = flussv1.ListOffsetsRequest_LATEST
	case flussv1.ScanRequest_TIMESTAMP:
		spec = flussv1.ListOffsetsRequest_TIMESTAMP
	default:
		return nil, nil // the server names what is wrong with it
	}
	res, err := retried(ctx, c, c.adminAny, flussv1connect.AdminServiceClient.ListOffsets, &flussv1.ListOffsetsRequest{
		Table: req.GetTable(), Partition: req.GetPartition(), Buckets: req.GetBuckets(), Spec: spec, TimestampMs: req.GetTimestampMs()})
	if err != nil {
		return nil, err
	}
	pos := res.GetOffsets()
	for _, o := range pos {
		o.Partition = req.GetPartition()
	}
	return pos, nil
}

// follow runs a following scan from pos, the offset of each of its buckets,
// and keeps pos at the next offset of every bucket fn has seen. When the
// stream breaks after fn has seen a message (its node died or restarted),
// it asks again from pos, with a fresh retry budget: the rows fn has seen
// are not sent twice and none are skipped, as a Kafka consumer resumes
// from its position. A failure before any message is retried as Scan's
// are; other errors end it.
func (c *Client) follow(ctx context.Context, req *flussv1.ScanRequest, pos []*flussv1.BucketOffset, fn func(*flussv1.ScanResponse) error) error {
	at := make(map[bucketRef]*flussv1.BucketOffset, len(pos))
	for _, o := range pos {
		at[bucketRef{o.GetPartition(), o.GetBucket()}] = o
	}
	r := proto.CloneOf(req)
	r.From, r.TimestampMs, r.Offsets = flussv1.ScanRequest_OFFSETS, 0, pos
	track := func(m *flussv1.ScanResponse) error {
		if o := at[bucketRef{m.GetPartition(), m.GetBucket()}]; o != nil && m.GetNextOffset() > o.Offset {
			o.Offset = m.GetNextOffset()
		}
		return fn(m)
	}
	for {
		seen, err := c.scanRetried(ctx, r, track)
		if !seen || err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
	}
}

func (c *Client) scanOnce(ctx context.Context, req *flussv1.ScanRequest, fn func(*flussv1.ScanResponse) error, seen *bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, done := c.readAny(ctx)
	stream, err := rc.Scan(ctx, connect.NewRequest(req))
	if err != nil {
		if done != nil {
			done(err)
		}
		return err
	}
	defer stream.Close()
	for stream.Receive() {
		*seen = true
		if err := fn(stream.Msg()); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	if err := stream.Err(); err != nil {
		if done != nil && !*seen {
			done(err) // retried: with routing, elsewhere if the seed failed it
		}
		return err
	}
	return nil
}
