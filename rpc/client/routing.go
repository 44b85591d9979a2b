package client

import (
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/proto/flussv1/flussv1connect"
)

// DefaultRoutingRefresh is how old a table's cached bucket → leader map may
// grow before the next bucket-addressed call reloads it.
const DefaultRoutingRefresh = 30 * time.Second

// routingFailureBackoff is how long a table whose layout could not be read
// is served by the seed before the layout is asked for again.
const routingFailureBackoff = time.Second

// WithRouting makes bucket-addressed calls (AppendArrow, AppendRecord and
// AppendRequest with a bucket, Fetch, LimitScan of one bucket) go straight
// to the bucket's leader instead of the base URL. The client learns the
// leaders from GetTableLayout and their addresses from DescribeCluster,
// caches them per table, reloads them every DefaultRoutingRefresh and as
// soon as a call to a guessed leader fails with `unavailable` (which
// includes a refused connection), and falls back to the base URL whenever
// it knows no leader. When the base URL's node itself answers a call
// `unavailable` (it is down, or cut off from the bucket's other replicas),
// the client asks another node it learned of for the layout and sends its
// calls there for a while (routingFailureBackoff), bucket-addressed or not
// (Upsert, Delete, Lookup, Scan, admin reads such as GetTable), so a seed that cannot serve does not hold its
// clients up. Routing only saves the
// server's forwarding hop: every node accepts every call, so results do
// not depend on it.
func WithRouting() Option {
	return func(o *options) {
		o.routing = true
		if o.routeRefresh <= 0 {
			o.routeRefresh = DefaultRoutingRefresh
		}
	}
}

// WithRoutingRefresh turns routing on (see WithRouting) with the given
// cache lifetime of a table's leaders; d <= 0 reloads them before every
// bucket-addressed call.
func WithRoutingRefresh(d time.Duration) Option {
	return func(o *options) {
		o.routing = true
		o.routeRefresh = max(d, time.Nanosecond)
	}
}

// endpoint is the generated clients of one node's client address.
type endpoint struct {
	addr  string // host:port
	admin flussv1connect.AdminServiceClient
	write flussv1connect.WriteServiceClient
	read  flussv1connect.ReadServiceClient
}

// bucketRef names a bucket of a table.
type bucketRef struct {
	partition string
	bucket    int32
}

// tableRoute is the cached layout of one table.
type tableRoute struct {
	leaders    map[bucketRef]int32 // leader node id per bucket; absent: unknown
	expires    time.Time           // reload at or after this time
	refreshing bool                // one caller is reloading it now
}

// router maps buckets to their leaders' endpoints. All fields after mu are
// guarded by it; calls to the server are made without holding it.
type router struct {
	admin    flussv1connect.AdminServiceClient // the seed's
	seedAddr string                            // host:port of the base URL
	scheme   string                            // of the base URL
	refresh  time.Duration
	dial     func(baseURL string) *endpoint
	now      func() time.Time

	mu     sync.Mutex
	tables map[string]*tableRoute
	nodes  map[int32]string // node id → client address (host:port)
	ends   map[string]*endpoint
	down   map[string]time.Time // address → until when calls avoid it
	// nodesExpire is when calls that name no bucket read nodes again (a
	// table's layout reload refreshes it too); learning is set while one
	// caller reads it.
	nodesExpire time.Time
	learning    bool
}

// initRouting sets up leader routing when an option asked for it. dial
// builds the generated clients of another node with the client's HTTP
// client and connect options.
func (c *Client) initRouting(o *options, baseURL string, dial func(baseURL string) *endpoint) {
	if !o.routing {
		return
	}
	r := &router{
		admin:   c.admin,
		scheme:  "http",
		refresh: o.routeRefresh,
		dial:    dial,
		now:     time.Now,
		tables:  map[string]*tableRoute{},
		nodes:   map[int32]string{},
		ends:    map[string]*endpoint{},
		down:    map[string]time.Time{},
	}
	if u, err := url.Parse(baseURL); err == nil {
		r.seedAddr, r.scheme = u.Host, u.Scheme
	}
	c.route = r
}

// pickFor returns the service client for a bucket of table: its leader's
// when routing knows it (of picks the service from the leader's endpoint),
// else the base URL's (seed), and a function the caller reports the
// call's error to; done is nil without routing.
func pickFor[S any](ctx context.Context, c *Client, seed S, of func(*endpoint) S, table, partition string, bucket int32) (S, func(error)) {
	if c.route == nil {
		return seed, nil
	}
	ep, done := c.route.endpoint(ctx, table, partition, bucket)
	if ep == nil {
		return seed, done
	}
	return of(ep), done
}

// pickAny returns the service client for a call that names no bucket (the
// server spreads it over the buckets, or it is an admin call): the seed's,
// or with routing, while the seed is down, another node's; done is as for
// pickFor.
func pickAny[S any](ctx context.Context, c *Client, seed S, of func(*endpoint) S) (S, func(error)) {
	if c.route == nil {
		return seed, nil
	}
	ep, done := c.route.unaddressed(ctx)
	if ep == nil {
		return seed, done
	}
	return of(ep), done
}

func (ep *endpoint) writeService() flussv1connect.WriteServiceClient { return ep.write }
func (ep *endpoint) readService() flussv1connect.ReadServiceClient   { return ep.read }
func (ep *endpoint) adminService() flussv1connect.AdminServiceClient { return ep.admin }

// writeFor picks the WriteService client for a bucket of table (pickFor);
// no bucket, or a negative one, lets the server choose (writeAny).
func (c *Client) writeFor(ctx context.Context, table, partition string, bucket *int32) (flussv1connect.WriteServiceClient, func(error)) {
	if bucket == nil || *bucket < 0 {
		return c.writeAny(ctx)
	}
	return pickFor(ctx, c, c.write, (*endpoint).writeService, table, partition, *bucket)
}

// readFor picks the ReadService client for a bucket of table (pickFor).
func (c *Client) readFor(ctx context.Context, table, partition string, bucket int32) (flussv1connect.ReadServiceClient, func(error)) {
	if bucket < 0 {
		return c.read, nil
	}
	return pickFor(ctx, c, c.read, (*endpoint).readService, table, partition, bucket)
}

// writeAny picks the WriteService client for a call that names no bucket
// (pickAny).
func (c *Client) writeAny(ctx context.Context) (flussv1connect.WriteServiceClient, func(error)) {
	return pickAny(ctx, c, c.write, (*endpoint).writeService)
}

// readAny picks the ReadService client for a call that names no bucket
// (pickAny).
func (c *Client) readAny(ctx context.Context) (flussv1connect.ReadServiceClient, func(error)) {
	return pickAny(ctx, c, c.read, (*endpoint).readService)
}

// adminAny picks the AdminService client for an admin call that may be
// retried (pickAny).
func (c *Client) adminAny(ctx context.Context) (flussv1connect.AdminServiceClient, func(error)) {
	return pickAny(ctx, c, c.admin, (*endpoint).adminService)
}

// RoutedAddr reports where a call for the bucket would go now: the
// leader's client address, another node's while the base URL's node is
// avoided (it answered `unavailable` a moment ago), or "" for the base URL
// (no routing, or no leader known). It may reload the table's layout first.
func (c *Client) RoutedAddr(ctx context.Context, table, partition string, bucket int32) string {
	if c.route == nil {
		return ""
	}
	ep, _ := c.route.endpoint(ctx, table, partition, bucket)
	if ep == nil {
		return ""
	}
	return ep.addr
}

// layoutName is the table whose layout a name's buckets follow: a
// changelog or binlog view shares its table's buckets.
func layoutName(table string) string {
	if i := strings.IndexByte(table, '$'); i >= 0 {
		return table[:i]
	}
	return table
}

// endpoint returns the leader endpoint of a bucket, or nil for the seed,
// reloading the table's layout first when it is missing or old (unless
// another call is reloading it: that caller does not wait). done takes the
// call's error and drops the table's cached layout when the call failed
// with `unavailable`, so the retry asks again.
func (r *router) endpoint(ctx context.Context, table, partition string, bucket int32) (*endpoint, func(error)) {
	table = layoutName(table)
	r.mu.Lock()
	t := r.tables[table]
	if t == nil {
		t = &tableRoute{}
		r.tables[table] = t
	}
	if !t.refreshing && !r.now().Before(t.expires) {
		t.refreshing = true
		r.mu.Unlock()
		r.reload(ctx, table, t)
		r.mu.Lock()
	}
	var ep *endpoint
	if id, ok := t.leaders[bucketRef{partition, bucket}]; ok {
		ep = r.endpointOf(id)
	}
	if ep == nil {
		ep = r.instead()
	}
	r.mu.Unlock()
	done := func(err error) {
		if err != nil && connect.CodeOf(err) == connect.CodeUnavailable {
			r.invalidate(table, partition, bucket, ep)
		}
	}
	return ep, done
}

// unaddressed returns the endpoint for a call that names no bucket: nil
// for the seed, or another node while the seed is down. done takes the
// call's error and, when it is `unavailable`, avoids the node that failed
// it for routingFailureBackoff. So that there is another node to go to, it
// first reads the nodes from the seed when it never did or did so over a
// routing refresh ago (a caller that only writes by key loads no layout).
func (r *router) unaddressed(ctx context.Context) (*endpoint, func(error)) {
	r.mu.Lock()
	learn := !r.learning && !r.now().Before(r.nodesExpire) && !r.isDown(r.seedAddr)
	if learn {
		r.learning = true
		r.mu.Unlock()
		r.learnNodes(ctx)
		r.mu.Lock()
	}
	ep := r.instead()
	r.mu.Unlock()
	done := func(err error) {
		if err != nil && connect.CodeOf(err) == connect.CodeUnavailable {
			r.mu.Lock()
			r.markDown(ep)
			r.mu.Unlock()
		}
	}
	return ep, done
}

// endpointOf returns the endpoint of node id, nil for the seed, an
// unknown node or one that failed a moment ago. r.mu is held.
func (r *router) endpointOf(id int32) *endpoint {
	addr, ok := r.nodes[id]
	if !ok || addr == r.seedAddr || r.isDown(addr) {
		return nil
	}
	return r.endpointAt(addr)
}

// markDown makes calls avoid the node of ep (nil: the seed) for
// routingFailureBackoff. r.mu is held.
func (r *router) markDown(ep *endpoint) {
	addr := r.seedAddr
	if ep != nil {
		addr = ep.addr
	}
	r.down[addr] = r.now().Add(routingFailureBackoff)
}

// isDown reports whether the node at addr failed a call a moment ago.
// r.mu is held.
func (r *router) isDown(addr string) bool {
	until, ok := r.down[addr]
	if ok && !r.now().Before(until) {
		delete(r.down, addr)
		ok = false
	}
	return ok
}

// instead returns the node to send a call to in place of the seed while
// the seed is down: the known node of lowest id that is not down, nil when
// the seed is up or no other node is known (the call goes to the seed).
// r.mu is held.
func (r *router) instead() *endpoint {
	if !r.isDown(r.seedAddr) {
		return nil
	}
	var best int32
	for id, addr := range r.nodes {
		if addr != r.seedAddr && !r.isDown(addr) && (best == 0 || id < best) {
			best = id
		}
	}
	if best == 0 {
		return nil
	}
	return r.endpointAt(r.nodes[best])
}

// endpointAt returns the endpoint of the node at addr, made on first use.
// r.mu is held.
func (r *router) endpointAt(addr string) *endpoint {
	ep := r.ends[addr]
	if ep == nil {
		ep = r.dial(r.scheme + "://" + addr)
		ep.addr = addr
		r.ends[addr] = ep
	}
	return ep
}

// invalidate forgets the leader of one bucket (its calls go to the seed)
// and makes the next call reload the table's layout. A node that failed
// the call (ep; nil for the seed) is avoided for routingFailureBackoff, so
// a retry goes to the seed even if the reloaded layout still names it, or,
// when the seed failed it, to another node.
func (r *router) invalidate(table, partition string, bucket int32, ep *endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.markDown(ep)
	if t := r.tables[table]; t != nil {
		delete(t.leaders, bucketRef{partition, bucket})
		t.expires = time.Time{}
	}
}

// reload reads the table's layout and the nodes' addresses from the seed
// (from another node while the seed is down), one attempt each, and stores
// them in t. On failure the table keeps what it had and is asked for again
// after routingFailureBackoff.
func (r *router) reload(ctx context.Context, table string, t *tableRoute) {
	admin := r.admin
	r.mu.Lock()
	if ep := r.instead(); ep != nil {
		admin = ep.admin
	}
	r.mu.Unlock()
	leaders, cluster, err := r.fetch(ctx, admin, table)
	r.mu.Lock()
	defer r.mu.Unlock()
	t.refreshing = false
	if err != nil {
		t.expires = r.now().Add(min(routingFailureBackoff, r.refresh))
		return
	}
	t.leaders = leaders
	t.expires = r.now().Add(r.refresh)
	r.addNodes(cluster)
}

// learnNodes reads the nodes' client addresses from the seed, one
// attempt; on failure it is tried again after routingFailureBackoff.
func (r *router) learnNodes(ctx context.Context) {
	res, err := r.admin.DescribeCluster(ctx, connect.NewRequest(&flussv1.DescribeClusterRequest{}))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.learning = false
	if err != nil {
		r.nodesExpire = r.now().Add(min(routingFailureBackoff, r.refresh))
		return
	}
	r.addNodes(res.Msg)
}

// addNodes records the client addresses of a DescribeCluster answer.
// r.mu is held.
func (r *router) addNodes(res *flussv1.DescribeClusterResponse) {
	for _, n := range res.GetNodes() {
		if addr := r.reachable(n.GetClientAddr()); addr != "" {
			r.nodes[n.GetId()] = addr
		}
	}
	r.nodesExpire = r.now().Add(r.refresh)
}

// fetch asks a node for a table's bucket leaders and for the cluster's
// nodes.
func (r *router) fetch(ctx context.Context, admin flussv1connect.AdminServiceClient, table string) (map[bucketRef]int32, *flussv1.DescribeClusterResponse, error) {
	lres, err := admin.GetTableLayout(ctx, connect.NewRequest(&flussv1.GetTableLayoutRequest{Table: table}))
	if err != nil {
		return nil, nil, err
	}
	cres, err := admin.DescribeCluster(ctx, connect.NewRequest(&flussv1.DescribeClusterRequest{}))
	if err != nil {
		return nil, nil, err
	}
	leaders := make(map[bucketRef]int32, len(lres.Msg.GetBuckets()))
	for _, b := range lres.Msg.GetBuckets() {
		if b.GetLeader() != 0 {
			leaders[bucketRef{b.GetPartition(), b.GetBucket()}] = b.GetLeader()
		}
	}
	return leaders, cres.Msg, nil
}

// reachable turns a node's advertised client address into one this client
// can dial: a wildcard or empty host (a node listening on every interface
// without an advertised host) is replaced by the seed's host. It returns ""
// for an address it cannot use.
func (r *router) reachable(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		seedHost, _, err := net.SplitHostPort(r.seedAddr)
		if err != nil {
			return ""
		}
		host = seedHost
	}
	return net.JoinHostPort(host, port)
}
