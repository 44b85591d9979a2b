package node

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	flussv1 "github.com/fluss-node/fluss-node/proto/flussv1"
	"github.com/fluss-node/fluss-node/rpc/client"
)

// useCert copies the test certificate name (testdata/tls: self-signed,
// CN = name, valid 2026-2126, for tests only) and its key into dir as
// cert.pem and key.pem.
func useCert(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range [][2]string{{name + "-cert.pem", certFile}, {name + "-key.pem", keyFile}} {
		b, err := os.ReadFile(filepath.Join("testdata", "tls", f[0]))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

func TestTLSConfigValidate(t *testing.T) {
	dir := t.TempDir()
	cert, key := useCert(t, dir, "first")
	for _, tc := range []struct {
		c    TLSConfig
		want string
	}{
		{TLSConfig{}, ""},
		{TLSConfig{CertFile: cert, KeyFile: key}, ""},
		{TLSConfig{CertFile: cert}, "cert_file and key_file go together"},
		{TLSConfig{CertFile: cert, KeyFile: filepath.Join(dir, "none.pem")}, "no such file"},
		{TLSConfig{CertFile: key, KeyFile: cert}, "tls:"},
		{TLSConfig{PeerCertFile: cert, PeerKeyFile: key}, "peer_cert_file, peer_key_file and peer_ca_file go together"},
		{TLSConfig{PeerCertFile: cert, PeerKeyFile: key, PeerCAFile: key}, "holds no PEM certificate"},
		{TLSConfig{PeerCertFile: cert, PeerKeyFile: key, PeerCAFile: cert}, ""},
	} {
		err := tc.c.validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.c, err, tc.want)
		}
	}
}

// A renewed certificate is served after its files change; a broken pair
// keeps the one in use and is reported.
func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	cert, key := useCert(t, dir, "first")
	var errs []error
	r, err := newCertReloader(TLSConfig{CertFile: cert, KeyFile: key}, func(err error) { errs = append(errs, err) })
	if err != nil {
		t.Fatal(err)
	}
	served := func() string {
		t.Helper()
		r.mu.Lock()
		r.checked = time.Time{} // as if certReloadEvery passed
		r.mu.Unlock()
		c, err := r.getCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if cn := served(); cn != "first" {
		t.Fatalf("serves %q, want first", cn)
	}
	useCert(t, dir, "second")
	later := time.Now().Add(time.Minute) // a modification time that differs for sure
	os.Chtimes(cert, later, later)
	os.Chtimes(key, later, later)
	if cn := served(); cn != "second" {
		t.Fatalf("after renewal serves %q, want second", cn)
	}
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	evenLater := later.Add(time.Minute)
	os.Chtimes(key, evenLater, evenLater)
	if cn := served(); cn != "second" || len(errs) != 1 {
		t.Fatalf("with a broken key serves %q (errors %v), want second and one error", cn, errs)
	}
}

// peerTLSFiles points c's peer TLS at the test cluster's files
// (rpc/peer/testdata/tls), presenting the key pair name.
func peerTLSFiles(c *Config, name string) {
	dir := filepath.Join("..", "rpc", "peer", "testdata", "tls")
	c.TLS.PeerCertFile = filepath.Join(dir, name+"-cert.pem")
	c.TLS.PeerKeyFile = filepath.Join(dir, name+"-key.pem")
	c.TLS.PeerCAFile = filepath.Join(dir, "ca-cert.pem")
}

// Three nodes whose peer connections are mutual TLS form a cluster and
// replicate a table; a node whose certificate another CA signed is not let
// in.
func TestClusterPeerTLS(t *testing.T) {
	longCluster(t)
	nodes, _ := startThreeNodes(t, func(c *Config) { peerTLSFiles(c, "node") })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := client.New("http://"+nodes[2].ClientAddr(), client.WithRetry(client.Retry{Attempts: 50, Base: 50 * time.Millisecond, Max: 500 * time.Millisecond}))
	if err := c.CreateDatabase(ctx, "db", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTable(ctx, &flussv1.CreateTableRequest{
		Table:       "db.t",
		Schema:      &flussv1.Schema{Columns: []*flussv1.Column{{Name: "id", Type: "BIGINT"}}},
		BucketCount: 3,
		Properties:  map[string]string{"table.replication.factor": "3"},
	}); err != nil {
		t.Fatal(err)
	}
	for b := range int32(3) {
		if _, err := c.AppendRequest(ctx, &flussv1.AppendRequest{Table: "db.t", Bucket: new(b), Rows: []byte(`[{"id":1},{"id":2}]`)}); err != nil {
			t.Fatalf("append to bucket %d: %v", b, err)
		}
	}
	tbl, err := nodes[0].Table(ctx, "db.t")
	if err != nil {
		t.Fatal(err)
	}
	checkReplicasIdentical(t, nodes, tbl.ID)

	rogue := clusterConfig(t.TempDir())
	peerTLSFiles(&rogue, "rogue")
	rogue.TLS.PeerCAFile = filepath.Join("..", "rpc", "peer", "testdata", "tls", "rogue-cert.pem")
	rogue.Join = []string{nodes[0].peers.Addr()}
	n, err := New(rogue, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	err = n.Start(sctx)
	n.Close()
	if err == nil || !strings.Contains(err.Error(), "join") {
		t.Fatalf("a node of another CA joined: %v", err)
	}
	t.Logf("the node of another CA: %v", err)
	if got := len(nodes[0].meta.Nodes()); got != 3 {
		t.Fatalf("the cluster has %d nodes, want 3", got)
	}
}
