package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metallbPodName is the Pod object MetalLB v0.16 and later read at start-up
// to own what they create (their ConfigurationState); the harness runs the
// controller as a process, so it stands in for the Pod.
const metallbPodName = "metallb-controller"

// MetalLBVersion is the release `make tools` linked into bin/k8s ("" when
// it did not say).
func MetalLBVersion() string {
	b, err := os.ReadFile(filepath.Join(BinDir(), "metallb-version"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// metallbFlags are the flags a MetalLB release needs beyond those every
// release takes. From v0.16 on the controller fails to start without its
// own Pod (-pod-name), and binds its health probe to a fixed port unless
// told another (-health-probe-port), which parallel test packages share.
func metallbFlags(version string, healthPort int) []string {
	if !atLeast(version, 0, 16) {
		return nil
	}
	return []string{"-pod-name", metallbPodName, "-health-probe-port", fmt.Sprint(healthPort)}
}

// ensureMetalLBPod creates the stand-in Pod for releases that need one. It
// is never scheduled: no kubelet runs here.
func (c *Cluster) ensureMetalLBPod(ctx context.Context, version string) error {
	if metallbFlags(version, 0) == nil {
		return nil
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: MetalLBNamespace, Name: metallbPodName},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "quay.io/metallb/controller:" + version}}},
	}
	if err := c.Client.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// atLeast reports whether a release "vX.Y.Z" is X.Y or later ("" is not).
func atLeast(version string, major, minor int) bool {
	var x, y, z int
	if _, err := fmt.Sscanf(version, "v%d.%d.%d", &x, &y, &z); err != nil {
		return false
	}
	return x > major || (x == major && y >= minor)
}
