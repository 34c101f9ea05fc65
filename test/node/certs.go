package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// servingCerts writes into dir what the API server needs to serve pods as
// well as the harness: a CA (returned as PEM), a serving certificate that
// names localhost, 127.0.0.1, the node IP and the `kubernetes` Service IP
// (apiserver.crt/key, the names envtest looks for), and the ServiceAccount
// token signing pair (sa-signer.crt/key).
func servingCerts(dir string, ips ...net.IP) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := certTemplate(1, "metallb-iad-node-ca", now, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature)
	caTmpl.BasicConstraintsValid, caTmpl.IsCA = true, true
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := certTemplate(2, "kube-apiserver", now, x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.DNSNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	tmpl.IPAddresses = append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"apiserver.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		"ca.crt":        caPEM,
	}
	for name, k := range map[string]*ecdsa.PrivateKey{"apiserver.key": key, "sa-signer.key": saKey} {
		b, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b})
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

// certTemplate is a certificate valid from an hour before now for a day.
func certTemplate(serial int64, commonName string, now time.Time, usage x509.KeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     usage,
	}
}
