package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
	"github.com/fluss-node/fluss-node/raftmeta"
)

// Limits bounds what one request may cost. Zero fields take the defaults of
// DefaultLimits.
type Limits struct {
	// MaxRequestBytes bounds a request message (after decompression).
	// Default 64 MiB.
	MaxRequestBytes int
	// MaxBatchBytes bounds one encoded bucket batch of an Append. Default 16 MiB.
	MaxBatchBytes int
	// MaxFetchBytes bounds the record bytes one Fetch (or one Scan message)
	// returns; a request's maxBytes is clamped to it. It also bounds the
	// stored row bytes of a Lookup or PrefixLookup answer (more is
	// resource_exhausted) and of a LimitScan answer (fewer rows, at least
	// one). Default 16 MiB.
	MaxFetchBytes int
	// MaxRowsPerRequest bounds the rows one request carries (Append, Upsert,
	// Delete, Lookup keys) or returns (PrefixLookup, LimitScan). Default
	// 1,000,000.
	MaxRowsPerRequest int
	// MaxWait bounds a Fetch long-poll (maxWaitMs). Default 30 s.
	MaxWait time.Duration
	// MaxInflightRequestBytes bounds the bytes of large request messages
	// (64 KiB or more) the handlers work on at once; more wait (gate.go).
	// Default 64 MiB (one request of max_request_bytes at a time).
	MaxInflightRequestBytes int64
}

// DefaultLimits returns the documented defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestBytes:   64 << 20,
		MaxBatchBytes:     16 << 20,
		MaxFetchBytes:     16 << 20,
		MaxRowsPerRequest: 1_000_000,
		MaxWait:           30 * time.Second,

		MaxInflightRequestBytes: 64 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = d.MaxRequestBytes
	}
	if l.MaxBatchBytes <= 0 {
		l.MaxBatchBytes = d.MaxBatchBytes
	}
	if l.MaxFetchBytes <= 0 {
		l.MaxFetchBytes = d.MaxFetchBytes
	}
	if l.MaxRowsPerRequest <= 0 {
		l.MaxRowsPerRequest = d.MaxRowsPerRequest
	}
	if l.MaxWait <= 0 {
		l.MaxWait = d.MaxWait
	}
	if l.MaxInflightRequestBytes <= 0 {
		l.MaxInflightRequestBytes = d.MaxInflightRequestBytes
	}
	return l
}

// compressMinBytes: responses smaller than this are sent uncompressed
// even when the client accepts gzip.
const compressMinBytes = 1 << 10

// service implements the three Connect services over a Backend.
type service struct {
	b   Backend
	lim Limits
	log *slog.Logger
	m   *metrics
	rr  atomic.Uint32 // rotates the bucket of key-less log-table appends
}

// HandlerOption configures NewHandler.
type HandlerOption func(*handlerOptions)

type handlerOptions struct {
	auth *Auth
}

// WithAuth makes every service call authenticate with a bearer token of
// one of a's users and authorizes it by the user's grants (auth.go), as
// long as a has users (a.Replace may change them at any time). /healthz,
// /readyz and /metrics stay open. A nil a allows everything.
func WithAuth(a *Auth) HandlerOption { return func(o *handlerOptions) { o.auth = a } }

// NewHandler returns the client-facing HTTP handler: the Admin, Write and
// Read services (Connect JSON with inline rows, Connect proto and gRPC, all
// served by connect-go), /healthz, /readyz and /metrics (for reg; a nil reg
// gets a private registry). The caller wraps it in h2c for gRPC over
// cleartext HTTP/2.
func NewHandler(b Backend, lim Limits, reg *prometheus.Registry, logger *slog.Logger, options ...HandlerOption) http.Handler {
	var ho handlerOptions
	for _, f := range options {
		f(&ho)
	}
	if logger == nil {
		logger = slog.Default()
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	lim = lim.withDefaults()
	m := newMetrics(reg, func(name string) bool {
		// A scrape does not wait for a catalog that is not ready: the
		// series stay until the next one.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := b.Table(ctx, name)
		return !errors.Is(err, raftmeta.ErrTableNotFound)
	})
	s := &service{b: b, lim: lim, log: logger, m: m}
	gate := newRequestGate(lim.MaxInflightRequestBytes)
	registerGateMetrics(reg, gate)
	opts := []connect.HandlerOption{
		connect.WithReadMaxBytes(lim.MaxRequestBytes),
		// Compressing a small response (an Append result is a few dozen
		// bytes) costs a gzip writer reset per call, which dominated the
		// CPU of small writes, and saves nothing.
		connect.WithCompressMinBytes(compressMinBytes),
		connect.WithInterceptors(&interceptor{m: m, log: logger}),
	}
	if ho.auth != nil {
		// Inside the metrics interceptor, so that refusals are counted.
		opts = append(opts, connect.WithInterceptors(authInterceptor{}))
	}
	// Innermost: a request refused above takes nothing of the gate.
	opts = append(opts, connect.WithInterceptors(gateInterceptor{gate}))
	for _, c := range Codecs() {
		opts = append(opts, connect.WithCodec(c))
	}
	mux := http.NewServeMux()
	ew := connect.NewErrorWriter(opts...)
	mount := func(path string, h http.Handler) {
		h = plainJSONStreams(withLength(limitBody(gate.gateBody(h, ew, m), lim.MaxRequestBytes, ew, m)), lim.MaxRequestBytes, ew)
		if ho.auth != nil {
			// Outermost: nothing is read of a request refused here.
			h = ho.auth.authenticateHTTP(h, ew, m)
		}
		mux.Handle(path, h)
	}
	mount(flussv1connect.NewAdminServiceHandler(s, opts...))
	mount(flussv1connect.NewWriteServiceHandler(s, opts...))
	mount(flussv1connect.NewReadServiceHandler(s, opts...))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := b.Ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %v\n", err)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// limitBody rejects, before reading it, a request whose declared length is
// over the limit, with a message that names the limit. Bodies of unknown
// length are bounded by connect.WithReadMaxBytes.
func limitBody(h http.Handler, maxBytes int, ew *connect.ErrorWriter, m *metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > int64(maxBytes) && ew.IsSupported(r) {
			err := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"%w: request body of %d bytes is over max_request_bytes (%d); send smaller requests",
				ErrResourceExhausted, r.ContentLength, maxBytes))
			m.observe(r.URL.Path, connect.CodeResourceExhausted.String(), 0)
			_ = ew.Write(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ---------------------------------------------------------------- metrics

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// Client traffic per table ("db.table"), counted where the client's
	// request was answered.
	writtenRows, writtenBytes, readRows, readBytes, lookups *prometheus.CounterVec
}

// newMetrics registers the handler's metrics with reg. exists tells
// whether a table is still in the catalog: a table dropped through
// another node leaves this one's series as it is scraped (tableSeries).
func newMetrics(reg *prometheus.Registry, exists func(name string) bool) *metrics {
	table := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "fluss", Subsystem: "table", Name: name, Help: help,
		}, []string{"table"})
	}
	m := &metrics{
		requests: registered(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "fluss", Subsystem: "rpc", Name: "requests_total",
			Help: "Client RPCs handled, by procedure and Connect code.",
		}, []string{"procedure", "code"})),
		latency: registered(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "fluss", Subsystem: "rpc", Name: "request_duration_seconds",
			Help:    "Client RPC latency, by procedure and Connect code (streams: until the stream ends).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"procedure", "code"})),
		writtenRows:  table("written_rows_total", "Rows of the table's Append, Upsert and Delete requests this node answered with success."),
		writtenBytes: table("written_bytes_total", "Bytes of those requests' rows, keys or Arrow stream as the client sent them."),
		readRows:     table("read_rows_total", "Rows this node sent in answers to Fetch and Scan of the table (its $changelog and $binlog included)."),
		readBytes:    table("read_bytes_total", "Bytes of those rows or Arrow streams."),
		lookups:      table("lookup_keys_total", "Keys of the table's Lookup and prefixes of its PrefixLookup requests this node answered with success."),
	}
	ts := registered(reg, &tableSeries{vecs: m.tableVecs(), exists: exists})
	m.writtenRows, m.writtenBytes, m.readRows, m.readBytes, m.lookups = ts.vecs[0], ts.vecs[1], ts.vecs[2], ts.vecs[3], ts.vecs[4]
	return m
}

// tableVecs are the per-table counters.
func (m *metrics) tableVecs() []*prometheus.CounterVec {
	return []*prometheus.CounterVec{m.writtenRows, m.writtenBytes, m.readRows, m.readBytes, m.lookups}
}

// tableSeries collects the per-table counters, first dropping the series
// of tables that are gone from the catalog: DropTable removes them on the
// node that answers it (metrics.dropped), the other nodes learn of the drop
// from their catalog.
type tableSeries struct {
	vecs   []*prometheus.CounterVec
	exists func(name string) bool
}

func (ts *tableSeries) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range ts.vecs {
		v.Describe(ch)
	}
}

func (ts *tableSeries) Collect(ch chan<- prometheus.Metric) {
	ts.prune()
	for _, v := range ts.vecs {
		v.Collect(ch)
	}
}

// prune deletes the series of every table exists says is gone.
func (ts *tableSeries) prune() {
	if ts.exists == nil {
		return
	}
	all := make(chan prometheus.Metric, 64)
	go func() {
		for _, v := range ts.vecs {
			v.Collect(all)
		}
		close(all)
	}()
	names := map[string]bool{}
	for mt := range all {
		var d dto.Metric
		if mt.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "table" {
				names[l.GetValue()] = true
			}
		}
	}
	for name := range names {
		if !ts.exists(name) {
			for _, v := range ts.vecs {
				v.DeleteLabelValues(name)
			}
		}
	}
}

// registered registers c with reg and returns it, or the collector reg
// already holds under its name (a registry shared by several handlers, in
// tests).
func registered[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// wrote counts a successful write of rows (bytes as sent) to t.
func (m *metrics) wrote(t *raftmeta.Table, rows, bytes int) {
	name := t.FullName()
	m.writtenRows.WithLabelValues(name).Add(float64(rows))
	m.writtenBytes.WithLabelValues(name).Add(float64(bytes))
}

// read counts rows (bytes as sent) read from t.
func (m *metrics) read(t *raftmeta.Table, rows, bytes int) {
	if rows == 0 && bytes == 0 {
		return
	}
	name := t.FullName()
	m.readRows.WithLabelValues(name).Add(float64(rows))
	m.readBytes.WithLabelValues(name).Add(float64(bytes))
}

// lookedUp counts keys (or prefixes) looked up in t.
func (m *metrics) lookedUp(t *raftmeta.Table, keys int) {
	m.lookups.WithLabelValues(t.FullName()).Add(float64(keys))
}

// dropped removes a dropped table's series.
func (m *metrics) dropped(name string) {
	for _, v := range m.tableVecs() {
		v.DeleteLabelValues(name)
	}
}

// registerGateMetrics exports how many bytes of large requests the handlers
// hold and how many requests wait for room. A registry shared by several
// handlers (tests) keeps the first.
func registerGateMetrics(reg *prometheus.Registry, g *requestGate) {
	_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "fluss", Subsystem: "rpc", Name: "inflight_request_bytes",
		Help: "Bytes of large request messages (64 KiB or more) being handled, against limits.max_inflight_request_bytes.",
	}, func() float64 { return float64(g.Held()) }))
	_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "fluss", Subsystem: "rpc", Name: "gate_waiting_requests",
		Help: "Large requests waiting for limits.max_inflight_request_bytes to have room.",
	}, func() float64 { return float64(g.Waiting()) }))
}

func (m *metrics) observe(procedure, code string, d time.Duration) {
	m.requests.WithLabelValues(procedure, code).Inc()
	m.latency.WithLabelValues(procedure, code).Observe(d.Seconds())
}

func codeLabel(err *connect.Error) string {
	if err == nil {
		return "ok"
	}
	return err.Code().String()
}

// interceptor maps handler errors to Connect errors (toConnectError, the
// one mapping) and records per-procedure counts and latency. Requests that
// fail while connect-go decodes them (malformed input, over
// MaxRequestBytes) never reach a handler and are not counted here.
type interceptor struct {
	m   *metrics
	log *slog.Logger
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		res, err := next(ctx, req)
		var ce *connect.Error
		if err != nil {
			ce = toConnectErrorLog(err, i.log)
			err = ce
		}
		i.m.observe(req.Spec().Procedure, codeLabel(ce), time.Since(start))
		return res, err
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		var ce *connect.Error
		if err != nil {
			ce = toConnectErrorLog(err, i.log)
			err = ce
		}
		i.m.observe(conn.Spec().Procedure, codeLabel(ce), time.Since(start))
		return err
	}
}
