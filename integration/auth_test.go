package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluss-node/fluss-node/rpc/client"
)

var tokenLineRE = regexp.MustCompile(`(?m)^# ([0-9a-f]{64})$`)

// newUser runs `fluss-node auth token` and returns the token and the
// [[auth.users]] table it printed.
func newUser(t *testing.T, name string, grants ...string) (token, table string) {
	t.Helper()
	args := []string{"auth", "token", "--name", name}
	for _, g := range grants {
		args = append(args, "--grant", g)
	}
	out := mustCLI(t, "127.0.0.1:1", "", args...).stdout
	m := tokenLineRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("auth token printed no token:\n%s", out)
	}
	return m[1], out
}

// A server with [auth] users, driven by the CLI and plain HTTP as an
// operator and its users would: tokens from `auth token`, --token and
// $FLUSS_TOKEN, refusals that say what is missing, open health checks and
// a guarded profiler.
func TestAuthThroughTheBinary(t *testing.T) {
	adminTok, adminUser := newUser(t, "admin")
	readerTok, readerUser := newUser(t, "reader", "read:shop")
	cfg := "[debug]\npprof = true\n\n" + adminUser + readerUser
	p := startNodeWithConfig(t, filepath.Join(t.TempDir(), "data"), cfg)
	if !strings.Contains(p.logText(), "client API calls need a bearer token") {
		t.Errorf("the log does not say that tokens are needed:\n%s", p.logText())
	}

	r := runCLI(t, p.addr, "", "db", "create", "shop")
	if r.code == 0 || !strings.Contains(r.stderr, "unauthenticated") || !strings.Contains(r.stderr, "--token") {
		t.Fatalf("db create without a token: exit %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, p.addr, "", "db", "create", "shop", "--token", readerTok)
	if r.code == 0 || !strings.Contains(r.stderr, "permission_denied") || !strings.Contains(r.stderr, `"create:shop"`) {
		t.Fatalf("db create by the reader: exit %d, %q", r.code, r.stderr)
	}
	mustCLI(t, p.addr, "", "db", "create", "shop", "--token", adminTok)
	mustCLI(t, p.addr, "", "table", "create", "shop.events", "--schema", "id BIGINT NOT NULL, kind STRING", "--token", adminTok)
	mustCLI(t, p.addr, `{"id":1,"kind":"a"}`+"\n"+`{"id":2,"kind":"b"}`+"\n", "append", "shop.events", "--token", adminTok)

	asReader := []string{"FLUSS_TOKEN=" + readerTok}
	r = runCLIEnv(t, asReader, p.addr, `{"id":3}`+"\n", "append", "shop.events")
	if r.code == 0 || !strings.Contains(r.stderr, "permission_denied") || !strings.Contains(r.stderr, `"write:shop.events"`) {
		t.Fatalf("append by the reader: exit %d, %q", r.code, r.stderr)
	}
	r = runCLIEnv(t, asReader, p.addr, "", "scan", "shop.events", "--limit", "10")
	if r.code != 0 {
		t.Fatalf("scan by the reader: exit %d, %q", r.code, r.stderr)
	}
	if ids := scanIDs(t, r.stdout); len(ids) != 2 || ids[0] != 1 || ids[1] != 2 {
		t.Fatalf("the reader scanned ids %v, want [1 2] (the refused append stored nothing)", ids)
	}
	if r := runCLIEnv(t, asReader, p.addr, "", "cluster", "status"); r.code != 0 {
		t.Errorf("cluster status by the reader: exit %d, %q", r.code, r.stderr)
	}
	if r := runCLIEnv(t, asReader, p.addr, "", "db", "list"); r.code != 0 || strings.TrimSpace(r.stdout) != "shop" {
		t.Errorf("db list by the reader: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}

	get := func(path, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if st := get(path, ""); st != 200 {
			t.Errorf("GET %s without a token: %d", path, st)
		}
	}
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {readerTok, 403}, {adminTok, 200}} {
		if st := get("/debug/pprof/", tc.token); st != tc.want {
			t.Errorf("GET /debug/pprof/ with token %q: %d, want %d", tc.token, st, tc.want)
		}
	}
}

// A config whose [auth] users are wrong does not start.
func TestAuthBadConfigRefusesToStart(t *testing.T) {
	cfg := "[[auth.users]]\nname = \"x\"\ntoken_sha256 = \"1234\"\ngrants = [\"all:*\"]\n"
	path := filepath.Join(t.TempDir(), "fluss.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := startNodeErr(t, 0, filepath.Join(t.TempDir(), "data"), "--config", path)
	if err == nil || !strings.Contains(err.Error(), `auth user "x": token_sha256 "1234": want 64 hex digits`) {
		t.Fatalf("a node with a 4-digit token_sha256: %v", err)
	}
}

// The client API over TLS: the CLI with https:// and $SSL_CERT_FILE
// (Connect over HTTP/1.1, Scan's stream included), the Go client's gRPC
// over HTTP/2 with ALPN, and what a client that does not trust the
// certificate or speaks plain HTTP gets.
func TestTLSThroughTheBinary(t *testing.T) {
	certFile, err := filepath.Abs("testdata/tls/localhost-cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := strings.Replace(certFile, "-cert.pem", "-key.pem", 1)
	tok, user := newUser(t, "admin")
	cfg := fmt.Sprintf("[tls]\ncert_file = %q\nkey_file = %q\n\n%s", certFile, keyFile, user)
	p := startNodeWithConfig(t, filepath.Join(t.TempDir(), "data"), cfg)
	url := "https://" + p.addr
	trusted := []string{"SSL_CERT_FILE=" + certFile, "FLUSS_TOKEN=" + tok}

	r := runCLIEnv(t, []string{"FLUSS_TOKEN=" + tok}, url, "", "db", "list")
	if r.code == 0 || !strings.Contains(r.stderr, "certificate") {
		t.Fatalf("db list without trusting the certificate: exit %d, %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"db", "create", "shop"},
		{"table", "create", "shop.events", "--schema", "id BIGINT NOT NULL", "--buckets", "2"},
	} {
		if r := runCLIEnv(t, trusted, url, "", args...); r.code != 0 {
			t.Fatalf("%v over TLS: exit %d, %q", args, r.code, r.stderr)
		}
	}
	if r := runCLIEnv(t, trusted, url, "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n", "append", "shop.events"); r.code != 0 {
		t.Fatalf("append over TLS: exit %d, %q", r.code, r.stderr)
	}
	r = runCLIEnv(t, trusted, url, "", "scan", "shop.events", "--limit", "3")
	if ids := scanIDs(t, r.stdout); r.code != 0 || len(ids) != 3 {
		t.Fatalf("scan over TLS: exit %d, ids %v, %q", r.code, ids, r.stderr)
	}

	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	var protos http.Protocols
	protos.SetHTTP2(true)
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Protocols: &protos}}
	c := client.New(url, client.WithGRPC(), client.WithHTTPClient(h2), client.WithToken(tok))
	dbs, err := c.ListDatabases(context.Background())
	if err != nil || len(dbs) != 1 || dbs[0] != "shop" {
		t.Fatalf("gRPC over TLS: %v, %v", dbs, err)
	}

	res, err := http.Get("http://" + p.addr + "/healthz")
	if err == nil {
		res.Body.Close()
		if res.StatusCode == 200 {
			t.Fatal("plain HTTP to the TLS listener answered 200")
		}
	}
}

// SIGHUP reads the config file's [auth] users again (systemctl reload):
// new tokens work and removed ones stop at once; a broken file leaves the
// users as they were.
func TestAuthReloadOnSIGHUP(t *testing.T) {
	oldTok, oldUser := newUser(t, "old")
	newTok, newUserTable := newUser(t, "new")
	path := filepath.Join(t.TempDir(), "fluss.toml")
	write := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(oldUser)
	p := startNode(t, filepath.Join(t.TempDir(), "data"), "--config", path)
	works := func(tok string) bool {
		t.Helper()
		return runCLI(t, p.addr, "", "db", "list", "--token", tok).code == 0
	}
	if !works(oldTok) || works(newTok) {
		t.Fatal("before the reload: want the old token only")
	}
	write(newUserTable)
	sighup(t, p, "reloaded the client API's users")
	if works(oldTok) || !works(newTok) {
		t.Fatal("after the reload: want the new token only")
	}
	write(newUserTable + "grants = [\"own:*\"]\n")
	sighup(t, p, "the client API's users stay as they were")
	if !works(newTok) {
		t.Fatal("a broken config took the users away")
	}
}

// SIGHUP sets the log level from the config file's [log] level: a quieter
// level hides the reload's own Info line, a more verbose one shows it.
func TestLogLevelReloadOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fluss.toml")
	if err := os.WriteFile(path, []byte("[log]\nlevel = \"info\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, filepath.Join(t.TempDir(), "data"), "--config", path)
	hup := func(level, wantLog string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("[log]\nlevel = \""+level+"\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sighup(t, p, wantLog)
	}
	const reloaded = "reloaded the client API's users" // Info, after the level is set
	hup("warn", "to=WARN")
	hup("debug", "to=DEBUG")
	waitFor(t, 10*time.Second, func() error {
		if n := strings.Count(p.logText(), reloaded); n != 1 {
			return fmt.Errorf("%d %q lines, want 1 (the one at level debug)", n, reloaded)
		}
		return nil
	})
	hup("nonsense", "the log level stays as it was")
}

// sighup sends p SIGHUP and waits until its log holds wantLog.
func sighup(t *testing.T, p *proc, wantLog string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() error {
		if !strings.Contains(p.logText(), wantLog) {
			return fmt.Errorf("no %q in the log yet", wantLog)
		}
		return nil
	})
}

// Three processes whose peer connections are mutual TLS (and whose client
// API needs a token) form a cluster with `join`, replicate a table and
// survive the kill -9 of a node.
func TestPeerTLSClusterThroughTheBinary(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "rpc", "peer", "testdata", "tls"))
	if err != nil {
		t.Fatal(err)
	}
	tok, user := newUser(t, "admin")
	cfg := fmt.Sprintf("[tls]\npeer_cert_file = %q\npeer_key_file = %q\npeer_ca_file = %q\n\n%s",
		filepath.Join(dir, "node-cert.pem"), filepath.Join(dir, "node-key.pem"), filepath.Join(dir, "ca-cert.pem"), user)
	nodes := startJoinedCluster(t, cfg)
	asAdmin := []string{"FLUSS_TOKEN=" + tok}
	waitFor(t, 30*time.Second, func() error {
		r := runCLIEnv(t, asAdmin, nodes[0].client, "", "cluster", "status")
		if n := strings.Count(r.stdout, " active "); r.code != 0 || n != 3 {
			return fmt.Errorf("cluster status: exit %d, %d active: %s%s", r.code, n, r.stdout, r.stderr)
		}
		return nil
	})
	mustCLIEnv := func(addr, stdin string, args ...string) cliResult {
		t.Helper()
		r := runCLIEnv(t, asAdmin, addr, stdin, args...)
		if r.code != 0 {
			t.Fatalf("fluss-node %q: exit %d: %s", args, r.code, r.stderr)
		}
		return r
	}
	mustCLIEnv(nodes[1].client, "", "db", "create", "shop")
	mustCLIEnv(nodes[1].client, "", "table", "create", "shop.events", "--schema", "id BIGINT NOT NULL", "--buckets", "3", "--set", "table.replication.factor=3")
	var rows strings.Builder
	for i := range 30 {
		fmt.Fprintf(&rows, "{\"id\":%d}\n", i)
	}
	mustCLIEnv(nodes[2].client, rows.String(), "append", "shop.events")
	nodes[0].p.kill()
	r := mustCLIEnv(nodes[1].client, "", "scan", "shop.events", "--limit", "30")
	if ids := scanIDs(t, r.stdout); len(ids) != 30 {
		t.Fatalf("after the kill of node 1, node 2 scans %d rows, want 30", len(ids))
	}
}
