package rpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"connectrpc.com/connect"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
)

// Operation is what a grant allows on a resource; the names are Fluss's
// (and Kafka's) ACL operations.
type Operation uint8

const (
	OpDescribe Operation = 1 << iota // see a database or table: GetTable, layouts, offsets, partitions
	OpRead                           // Fetch, Scan, Lookup, PrefixLookup, LimitScan
	OpWrite                          // Append, Upsert, Delete
	OpCreate                         // CreateDatabase, CreateTable
	OpDrop                           // DropDatabase, DropTable
	OpAlter                          // AlterTable, Create/DropPartition; on "*": drain, undrain, rebalance
	OpAll      = OpDescribe | OpRead | OpWrite | OpCreate | OpDrop | OpAlter
)

var opNames = []struct {
	name string
	op   Operation
}{
	{"describe", OpDescribe}, {"read", OpRead}, {"write", OpWrite},
	{"create", OpCreate}, {"drop", OpDrop}, {"alter", OpAlter}, {"all", OpAll},
}

func (o Operation) String() string {
	for _, n := range opNames {
		if n.op == o {
			return n.name
		}
	}
	return fmt.Sprintf("operation(%#x)", uint8(o))
}

// Grant allows Ops on a resource: every database and table and the cluster
// itself (Database ""), one database and all its tables (Table ""), or one
// table (with its $changelog and $binlog).
type Grant struct {
	Ops             Operation
	Database, Table string
}

// ParseGrant reads "OPERATION:RESOURCE": OPERATION is describe, read,
// write, create, drop, alter or all; RESOURCE is "*", "DB" or "DB.TABLE".
// Every operation but describe also allows describe of the same resource,
// as in Kafka.
func ParseGrant(s string) (Grant, error) {
	opName, res, ok := strings.Cut(s, ":")
	if !ok {
		return Grant{}, fmt.Errorf("grant %q: want OPERATION:RESOURCE, such as \"read:shop.orders\"", s)
	}
	var g Grant
	for _, n := range opNames {
		if n.name == opName {
			g.Ops = n.op
		}
	}
	if g.Ops == 0 {
		return Grant{}, fmt.Errorf("grant %q: unknown operation %q (want describe, read, write, create, drop, alter or all)", s, opName)
	}
	g.Ops |= OpDescribe
	switch db, table, hasTable := strings.Cut(res, "."); {
	case res == "*":
	case db == "" || strings.ContainsAny(res, "*$") || (hasTable && (table == "" || strings.Contains(table, "."))):
		return Grant{}, fmt.Errorf("grant %q: resource %q must be \"*\", a database or \"database.table\"", s, res)
	default:
		g.Database, g.Table = db, table
	}
	return g, nil
}

func (g Grant) String() string {
	res := "*"
	switch {
	case g.Table != "":
		res = g.Database + "." + g.Table
	case g.Database != "":
		res = g.Database
	}
	ops := g.Ops
	if ops != OpAll && ops != OpDescribe {
		ops &^= OpDescribe // implied by every other operation
	}
	return ops.String() + ":" + res
}

// covers tells whether g allows op on the resource db.table (table ""
// for the database itself, db "" for the cluster).
func (g Grant) covers(op Operation, db, table string) bool {
	if g.Ops&op != op {
		return false
	}
	switch {
	case g.Database == "":
		return true
	case db != g.Database:
		return false
	default:
		return g.Table == "" || g.Table == table
	}
}

// User is a principal of the client API, known by the SHA-256 of its
// bearer token.
type User struct {
	Name        string
	TokenSHA256 [32]byte
	Grants      []Grant
}

// allowed tells whether u may do op on db.table.
func (u *User) allowed(op Operation, db, table string) bool {
	return slices.ContainsFunc(u.Grants, func(g Grant) bool { return g.covers(op, db, table) })
}

// seesDatabase tells whether u holds any grant inside db (or on all).
func (u *User) seesDatabase(db string) bool {
	return slices.ContainsFunc(u.Grants, func(g Grant) bool { return g.Database == "" || g.Database == db })
}

// Auth authenticates client requests by bearer token and authorizes them
// by their users' grants. Without users it lets every request through. Its
// users can be replaced while it serves (Replace). A nil *Auth allows
// everything.
type Auth struct {
	users atomic.Pointer[userTable]
}

// userTable is one generation of users, looked up by token hash.
type userTable struct {
	byToken map[[32]byte]*User
}

// NewAuth checks users (NewAuth of none is an open Auth) and returns their
// Auth.
func NewAuth(users []User) (*Auth, error) {
	a := new(Auth)
	if err := a.Replace(users); err != nil {
		return nil, err
	}
	return a, nil
}

// Replace checks users (distinct names and tokens) and makes them the
// users of every request from now on; on an error the old ones stay.
func (a *Auth) Replace(users []User) error {
	users = slices.Clone(users) // the table points into it
	t := &userTable{byToken: make(map[[32]byte]*User, len(users))}
	names := map[string]bool{}
	for i := range users {
		u := &users[i]
		switch {
		case u.Name == "":
			return fmt.Errorf("auth: user %d has no name", i+1)
		case names[u.Name]:
			return fmt.Errorf("auth: user %q is listed twice", u.Name)
		case t.byToken[u.TokenSHA256] != nil:
			return fmt.Errorf("auth: users %q and %q have the same token", t.byToken[u.TokenSHA256].Name, u.Name)
		}
		names[u.Name] = true
		t.byToken[u.TokenSHA256] = u
	}
	a.users.Store(t)
	return nil
}

// open tells whether a lets every request through: nil, or no users.
func (a *Auth) open() bool { return a == nil || len(a.users.Load().byToken) == 0 }

// HashToken is the SHA-256 of a token, as User.TokenSHA256 holds it.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// ParseTokenHash reads the hex SHA-256 of a token.
func ParseTokenHash(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("token_sha256 %q: want 64 hex digits, the SHA-256 of the token (`fluss-node auth token` prints one)", s)
	}
	copy(h[:], b)
	return h, nil
}

type userKey struct{}

// authenticate resolves the request's "Authorization: Bearer TOKEN".
func (a *Auth) authenticate(h http.Header) (*User, error) {
	v := h.Get("Authorization")
	if v == "" {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New(
			"this server requires a token: send \"Authorization: Bearer TOKEN\" (CLI: --token or $FLUSS_TOKEN)"))
	}
	scheme, token, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New(
			"the Authorization header must be \"Bearer TOKEN\""))
	}
	u := a.users.Load().byToken[HashToken(token)]
	if u == nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, errors.New("unknown token"))
	}
	return u, nil
}

// authenticateHTTP rejects, before its body is read, a request without a
// known token, and hands the user to the interceptor in the context.
func (a *Auth) authenticateHTTP(h http.Handler, ew *connect.ErrorWriter, m *metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open() {
			h.ServeHTTP(w, r)
			return
		}
		u, err := a.authenticate(r.Header)
		if err != nil {
			m.observe(r.URL.Path, connect.CodeUnauthenticated.String(), 0)
			_ = ew.Write(w, r, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// authorize checks that u may make the request msg; it returns a
// permission_denied error that names the missing grant.
func authorize(u *User, msg any) error {
	op, db, table, err := required(msg)
	if err != nil || op == 0 {
		return err
	}
	if u.allowed(op, db, table) {
		return nil
	}
	res := "the cluster"
	switch {
	case table != "":
		res = db + "." + table
	case db != "":
		res = "database " + db
	}
	need := Grant{Ops: op, Database: db, Table: table}
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(
		"user %q may not %s %s: it needs a grant such as %q", u.Name, op, res, need))
}

// required names what a request needs: an operation on the cluster (db
// ""), a database (table "") or a table. Operation 0 needs only a known
// user (DescribeCluster: every client routes by it; the database and table
// lists, which are filtered instead). Unknown requests are refused, so a
// new method cannot go unguarded.
func required(msg any) (op Operation, db, table string, err error) {
	onTable := func(op Operation, name string) (Operation, string, string, error) {
		ref, err := parseTableName(name)
		return op, ref.Database, ref.Table, err
	}
	onDatabase := func(op Operation, name string) (Operation, string, string, error) {
		if name == "" {
			return 0, "", "", fmt.Errorf("%w: database name is empty", ErrInvalidRequest)
		}
		return op, name, "", nil
	}
	switch m := msg.(type) {
	case *flussv1.DescribeClusterRequest, *flussv1.ListDatabasesRequest, *flussv1.ListTablesRequest:
		return 0, "", "", nil
	case *flussv1.DrainNodeRequest, *flussv1.UndrainNodeRequest, *flussv1.DecommissionNodeRequest, *flussv1.RebalanceRequest,
		*flussv1.SetClusterConfigRequest, *flussv1.RestoreBucketRequest:
		return OpAlter, "", "", nil
	case *flussv1.CreateDatabaseRequest:
		return onDatabase(OpCreate, m.GetName())
	case *flussv1.DropDatabaseRequest:
		return onDatabase(OpDrop, m.GetName())
	case *flussv1.CreateTableRequest:
		return onTable(OpCreate, m.GetTable())
	case *flussv1.DropTableRequest:
		return onTable(OpDrop, m.GetTable())
	case *flussv1.AlterTableRequest:
		return onTable(OpAlter, m.GetTable())
	case *flussv1.CreatePartitionRequest:
		return onTable(OpAlter, m.GetTable())
	case *flussv1.DropPartitionRequest:
		return onTable(OpAlter, m.GetTable())
	case *flussv1.GetTableRequest:
		return onTable(OpDescribe, m.GetTable())
	case *flussv1.ListPartitionsRequest:
		return onTable(OpDescribe, m.GetTable())
	case *flussv1.ListOffsetsRequest:
		return onTable(OpDescribe, m.GetTable())
	case *flussv1.GetTableLayoutRequest:
		return onTable(OpDescribe, m.GetTable())
	case *flussv1.AppendRequest:
		return onTable(OpWrite, m.GetTable())
	case *flussv1.UpsertRequest:
		return onTable(OpWrite, m.GetTable())
	case *flussv1.DeleteRequest:
		return onTable(OpWrite, m.GetTable())
	case *flussv1.FetchRequest:
		return onTable(OpRead, m.GetTable())
	case *flussv1.ScanRequest:
		return onTable(OpRead, m.GetTable())
	case *flussv1.LookupRequest:
		return onTable(OpRead, m.GetTable())
	case *flussv1.PrefixLookupRequest:
		return onTable(OpRead, m.GetTable())
	case *flussv1.LimitScanRequest:
		return onTable(OpRead, m.GetTable())
	}
	return 0, "", "", connect.NewError(connect.CodePermissionDenied, fmt.Errorf("request %T has no authorization rule", msg))
}

// filterVisible drops from list answers the databases and tables u holds
// no grant in.
func filterVisible(u *User, req, res any) {
	switch r := res.(type) {
	case *flussv1.ListDatabasesResponse:
		r.Databases = slices.DeleteFunc(r.Databases, func(db string) bool { return !u.seesDatabase(db) })
	case *flussv1.ListTablesResponse:
		db := req.(*flussv1.ListTablesRequest).GetDatabase()
		r.Tables = slices.DeleteFunc(r.Tables, func(t string) bool { return !u.allowed(OpDescribe, db, t) })
	}
}

// authInterceptor authorizes each request message of a user that
// authenticateHTTP let in.
type authInterceptor struct{}

func userOf(ctx context.Context) *User {
	u, _ := ctx.Value(userKey{}).(*User)
	return u
}

func (authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		u := userOf(ctx)
		if u == nil {
			return next(ctx, req)
		}
		if err := authorize(u, req.Any()); err != nil {
			return nil, err
		}
		res, err := next(ctx, req)
		if err == nil {
			filterVisible(u, req.Any(), res.Any())
		}
		return res, err
	}
}

func (authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if u := userOf(ctx); u != nil {
			conn = &authorizedConn{StreamingHandlerConn: conn, u: u}
		}
		return next(ctx, conn)
	}
}

// authorizedConn authorizes every message a stream receives.
type authorizedConn struct {
	connect.StreamingHandlerConn
	u *User
}

func (c *authorizedConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	return authorize(c.u, msg)
}

// RequireAdmin guards h, a plain HTTP handler such as /debug/pprof/, with
// the token of a user granted "all:*"; an open Auth lets every request
// through.
func (a *Auth) RequireAdmin(h http.Handler) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open() {
			h.ServeHTTP(w, r)
			return
		}
		u, err := a.authenticate(r.Header)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnauthorized)
		case !u.allowed(OpAll, "", ""):
			http.Error(w, fmt.Sprintf("user %q may not use %s: it needs the grant \"all:*\"", u.Name, r.URL.Path), http.StatusForbidden)
		default:
			h.ServeHTTP(w, r)
		}
	})
}
