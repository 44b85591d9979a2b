package peer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// tlsHandshake is the first byte of a TLS connection (a handshake record).
const tlsHandshake = 0x16

// MutualTLS secures every peer connection with TLS 1.3 and certificates
// both ways, each checked against CA: holding a certificate the cluster's
// CA signed (with both the server and the client extended key usage) is
// what makes a node a peer. Host names are not checked: peers are
// addressed by IP and port, which change when a node moves, and every
// node is equally a peer.
type MutualTLS struct {
	// Certificate returns this node's certificate and key, for both the
	// listener and its dials (a reloading source may return a new one).
	Certificate func() (*tls.Certificate, error)
	// CA holds the certificate authorities whose certificates are peers.
	CA *x509.CertPool
}

func (t *MutualTLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.Certificate() },
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      t.CA,
	}
}

func (t *MutualTLS) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return t.Certificate() },
		// The chain is checked by VerifyConnection against CA; only the
		// host name check of the standard verification is skipped.
		InsecureSkipVerify: true,
		VerifyConnection:   t.verifyServer,
	}
}

// verifyServer checks the certificate chain a dialled peer presented.
func (t *MutualTLS) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer: the node sent no certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         t.CA,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("peer: the node's certificate (%q) is not of this cluster: %w", cs.PeerCertificates[0].Subject.CommonName, err)
	}
	return nil
}
