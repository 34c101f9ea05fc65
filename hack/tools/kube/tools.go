//go:build tools

// Package tools pins the Kubernetes commands this module builds: the local
// control plane (kube-apiserver, kube-controller-manager) and, for the
// one-node cluster of the node e2e provider, kubelet, kube-proxy and
// kube-scheduler.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
