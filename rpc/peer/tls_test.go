package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testTLS is the mutual TLS of the test cluster (testdata/tls: a CA and a
// node certificate it signed; "rogue" is a self-signed one of no cluster),
// presenting the key pair name.
func testTLS(t testing.TB, name string) *MutualTLS {
	t.Helper()
	dir := filepath.Join("testdata", "tls")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+"-cert.pem"), filepath.Join(dir, name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate in testdata")
	}
	return &MutualTLS{Certificate: func() (*tls.Certificate, error) { return &pair, nil }, CA: ca}
}

func listenTLS(t testing.TB, m *MutualTLS) *Mux {
	t.Helper()
	o := testOpts()
	o.TLS = m
	o.RPCTimeout = time.Second
	mux, err := Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mux.Close() })
	return mux
}

// Nodes with certificates of the cluster's CA call each other and run a
// raft group; a node without TLS, or with a certificate of another CA,
// gets nowhere in either direction.
func TestMutualTLS(t *testing.T) {
	a, b := listenTLS(t, testTLS(t, "node")), listenTLS(t, testTLS(t, "node"))
	b.Handle("echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	a.Handle("echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := a.Call(ctx, b.Addr(), "echo", []byte("over TLS")); err != nil || string(got) != "over TLS" {
		t.Fatalf("call between cluster nodes: %q, %v", got, err)
	}

	c := listenTLS(t, testTLS(t, "node"))
	var trs []raft.Transport
	for _, m := range []*Mux{a, b, c} {
		tr, err := m.Transport("g")
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	reps := bootstrap(t, trs)
	defer func() {
		for _, r := range reps {
			r.stop(t)
		}
	}()
	applyNRetry(t, reps, 50)

	plain := listen(t, "127.0.0.1:0")
	defer plain.Close()
	plain.Handle("echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	rogue := listenTLS(t, testTLS(t, "rogue"))
	rogue.Handle("echo", func(_ context.Context, req []byte) ([]byte, error) { return req, nil })
	for _, tc := range []struct {
		name     string
		from, to *Mux
	}{
		{"plain to TLS", plain, b},
		{"TLS to plain", a, plain},
		{"rogue certificate to the cluster", rogue, b},
		{"cluster to a rogue certificate", a, rogue},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		got, err := tc.from.Call(ctx, tc.to.Addr(), "echo", []byte("hi"))
		cancel()
		if err == nil {
			t.Errorf("%s: answered %q", tc.name, got)
		}
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	_, err := a.Call(ctx2, rogue.Addr(), "echo", nil)
	if err == nil || !strings.Contains(err.Error(), "not of this cluster") {
		t.Errorf("calling a rogue node: %v, want the certificate named as not of this cluster", err)
	}
}
