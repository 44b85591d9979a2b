package node

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSConfig serves the client API over TLS.
type TLSConfig struct {
	// CertFile and KeyFile are PEM files: the certificate chain (leaf
	// first) and its private key. Both empty (default): plain HTTP.
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

func (c TLSConfig) enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

func (c TLSConfig) validate() error {
	if !c.enabled() {
		return nil
	}
	if c.CertFile == "" || c.KeyFile == "" {
		return errors.New("tls: cert_file and key_file go together")
	}
	_, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	return nil
}

// certReloadEvery is how often a handshake may look whether the
// certificate files changed.
const certReloadEvery = 10 * time.Second

// certReloader serves the key pair of two files and reads them again when
// their modification times change, so a renewed certificate is used
// without a restart. A pair that fails to load keeps the old one.
type certReloader struct {
	certFile, keyFile string
	onError           func(error)

	mu              sync.Mutex
	cert            *tls.Certificate
	certMod, keyMod time.Time
	checked         time.Time
}

func newCertReloader(c TLSConfig, onError func(error)) (*certReloader, error) {
	r := &certReloader{certFile: c.CertFile, keyFile: c.KeyFile, onError: onError}
	if err := r.load(); err != nil {
		return nil, err
	}
	r.checked = time.Now()
	return r, nil
}

func (r *certReloader) load() error {
	cm, err := modTime(r.certFile)
	if err != nil {
		return err
	}
	km, err := modTime(r.keyFile)
	if err != nil {
		return err
	}
	if r.cert != nil && cm.Equal(r.certMod) && km.Equal(r.keyMod) {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	r.cert, r.certMod, r.keyMod = &cert, cm, km
	return nil
}

func modTime(path string) (time.Time, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("tls: %w", err)
	}
	return fi.ModTime(), nil
}

// getCertificate implements tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= certReloadEvery {
		r.checked = now
		if err := r.load(); err != nil {
			r.onError(err)
		}
	}
	return r.cert, nil
}

// serverTLS returns the client listener's TLS configuration.
func (r *certReloader) serverTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
}
