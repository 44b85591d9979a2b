package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fluss-node/fluss-node/rpc/peer"
)

// TLSConfig serves the client API over TLS, and makes the peer listener
// and its dials mutual TLS.
type TLSConfig struct {
	// CertFile and KeyFile are PEM files: the certificate chain (leaf
	// first) and its private key. Both empty (default): plain HTTP.
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// PeerCertFile, PeerKeyFile and PeerCAFile (PEM) make every
	// node-to-node connection mutual TLS (peer.MutualTLS): this node's
	// certificate, with both the server and the client extended key
	// usage, and the CA certificates that signed every node's. All three
	// empty (default): plain TCP.
	PeerCertFile string `toml:"peer_cert_file"`
	PeerKeyFile  string `toml:"peer_key_file"`
	PeerCAFile   string `toml:"peer_ca_file"`
}

func (c TLSConfig) enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

func (c TLSConfig) peerEnabled() bool {
	return c.PeerCertFile != "" || c.PeerKeyFile != "" || c.PeerCAFile != ""
}

func (c TLSConfig) validate() error {
	var errs []error
	switch {
	case !c.enabled():
	case c.CertFile == "" || c.KeyFile == "":
		errs = append(errs, errors.New("tls: cert_file and key_file go together"))
	default:
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("tls: %w", err))
		}
	}
	switch {
	case !c.peerEnabled():
	case c.PeerCertFile == "" || c.PeerKeyFile == "" || c.PeerCAFile == "":
		errs = append(errs, errors.New("tls: peer_cert_file, peer_key_file and peer_ca_file go together"))
	default:
		if _, err := c.peerCA(); err != nil {
			errs = append(errs, err)
		}
		if _, err := tls.LoadX509KeyPair(c.PeerCertFile, c.PeerKeyFile); err != nil {
			errs = append(errs, fmt.Errorf("tls: peer: %w", err))
		}
	}
	return errors.Join(errs...)
}

// peerCA reads the peer CA certificates.
func (c TLSConfig) peerCA() (*x509.CertPool, error) {
	b, err := os.ReadFile(c.PeerCAFile)
	if err != nil {
		return nil, fmt.Errorf("tls: peer_ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: peer_ca_file %s holds no PEM certificate", c.PeerCAFile)
	}
	return pool, nil
}

// peerTLS returns the peer listener's mutual TLS, or nil without it; its
// certificate is reloaded as the client listener's is.
func (c TLSConfig) peerTLS(onError func(error)) (*peer.MutualTLS, error) {
	if !c.peerEnabled() {
		return nil, nil
	}
	ca, err := c.peerCA()
	if err != nil {
		return nil, err
	}
	certs, err := newCertReloader(TLSConfig{CertFile: c.PeerCertFile, KeyFile: c.PeerKeyFile}, onError)
	if err != nil {
		return nil, err
	}
	return &peer.MutualTLS{Certificate: func() (*tls.Certificate, error) { return certs.getCertificate(nil) }, CA: ca}, nil
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
