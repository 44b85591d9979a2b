package node

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
