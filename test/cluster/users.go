package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountKubeconfig writes a kubeconfig that acts as the
// ServiceAccount namespace/name (the admin's certificate impersonating it),
// for running a controller binary with exactly the rights its RBAC grants.
func (c *Cluster) ServiceAccountKubeconfig(namespace, name string) (string, error) {
	cfg := c.ServiceAccountConfig(namespace, name)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Impersonate:           cfg.Impersonate.UserName,
		ImpersonateGroups:     cfg.Impersonate.Groups,
	}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "sa"}
	kc.CurrentContext = "local"
	p := filepath.Join(c.Dir, fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name))
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return "", err
	}
	return p, os.WriteFile(p, b, 0o600)
}
