// Package pki makes the certificates, keys and kubeconfigs of a single-node
// test Kubernetes cluster (kube-apiserver, kube-controller-manager,
// kube-scheduler and a kubelet), as PEM files in one directory. There are no
// etcd certificates: etcd is meant to listen on loopback only, without TLS.
// Keys are ECDSA P-256, except the service-account key, which is RSA 2048
// (see writeServiceAccountKeys).
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// Certificates start a little in the past, so that a component whose
	// clock lags the generating process's (a VM, a fresh namespace) still
	// takes them as valid.
	backdate = 5 * time.Minute
)

// Usage says what a leaf certificate authenticates: a TLS client, a TLS
// server or, as Client|Server, both.
type Usage int

const (
	Client Usage = 1 << iota
	Server
)

// Leaf describes a certificate that a CA issues. The Kubernetes components
// read the user from CommonName and the groups from Organizations.
type Leaf struct {
	CommonName    string
	Organizations []string
	DNSNames      []string
	IPs           []net.IP
	Usage         Usage
}

// CA is a self-signed certificate authority that issues leaf certificates.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// NewCA makes a new CA with a fresh key.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key of CA %q: %w", commonName, err)
	}
	template, err := newTemplate(pkix.Name{CommonName: commonName}, caValidity)
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", commonName, err)
	}
	template.IsCA = true
	template.BasicConstraintsValid = true
	template.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate of CA %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate of CA %q: %w", commonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", commonName, err)
	}
	return &CA{cert: cert, key: key, certPEM: encodeCert(der), keyPEM: keyPEM}, nil
}

// LoadCA reads a CA that NewCA made (its certificate and PKCS #8 key, as
// Generate writes them), to issue more certificates with it.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("loading CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading CA: %w", err)
	}
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, fmt.Errorf("loading CA %s, %s: no PEM block", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("loading CA %s: %w", certFile, err)
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("loading CA key %s: %w", keyFile, err)
	}
	ecKey, ok := key.(*ecdsa.PrivateKey)
	if !ok || !ecKey.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("loading CA %s: %s is not its ECDSA key", certFile, keyFile)
	}
	return &CA{cert: cert, key: ecKey, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// CertPEM returns the CA's certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// KeyPEM returns the CA's private key, PEM-encoded (PKCS #8).
func (ca *CA) KeyPEM() []byte { return ca.keyPEM }

// Issue makes a fresh key and a certificate for it signed by the CA, both
// PEM-encoded.
func (ca *CA) Issue(leaf Leaf) (certPEM, keyPEM []byte, err error) {
	if leaf.Usage&(Client|Server) == 0 {
		return nil, nil, fmt.Errorf("certificate %q: no usage (client, server or both)", leaf.CommonName)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key of certificate %q: %w", leaf.CommonName, err)
	}
	template, err := newTemplate(pkix.Name{CommonName: leaf.CommonName, Organization: leaf.Organizations}, leafValidity)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %q: %w", leaf.CommonName, err)
	}
	template.KeyUsage = x509.KeyUsageDigitalSignature
	if leaf.Usage&Client != 0 {
		template.ExtKeyUsage = append(template.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if leaf.Usage&Server != 0 {
		template.ExtKeyUsage = append(template.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	template.DNSNames = leaf.DNSNames
	template.IPAddresses = leaf.IPs
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate %q: %w", leaf.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %q: %w", leaf.CommonName, err)
	}
	return encodeCert(der), keyPEM, nil
}

// newTemplate has what CA and leaf certificates share: subject, validity and
// a random 128-bit serial, so that no two certificates of a run (or of two
// runs with the same CA name) are told apart by serial alone.
func newTemplate(subject pkix.Name, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(validity),
	}, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// encodeKey writes PKCS #8, which every component here reads for ECDSA and
// RSA keys alike.
func encodeKey(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
