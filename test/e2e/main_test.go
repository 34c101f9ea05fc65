// Package e2e is the end-to-end suite, on sigs.k8s.io/e2e-framework. By
// default it runs locally: the local control plane with the real MetalLB
// controller, the reference core, and the driver's four binaries as separate
// processes, two replicas each with leader election, as the chart deploys
// them. E2E_PROVIDER=kind runs it on a dual-stack kind cluster (for CI
// machines with a container engine), E2E_PROVIDER=node on a one-node
// cluster on this machine (test/node: root, Debian's containerd); both
// install MetalLB, the core and the driver from their charts with the same
// code (charts.go) and add the features only real Deployments show.
//
// E2E_CORE_SRC=<address-controller source tree> runs the real core in place
// of the reference core (test/core): built and run as a process locally,
// from its chart and an image built from that source on the node and kind.
//
// E2E_REPEAT (default 1) repeats the restart and failover features.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"

	"github.com/cozystack/metallb-iad/test/node"
)

var (
	testenv env.Environment
	local   *LocalProvider
	onNode  *NodeProvider
	repeat  = 1
	// teardownErr is the node provider's teardown verdict.
	teardownErr error
)

func TestMain(m *testing.M) {
	if v, err := strconv.Atoi(os.Getenv("E2E_REPEAT")); err == nil && v > 0 {
		repeat = v
	}
	cfg := envconf.New()
	testenv = env.NewWithConfig(cfg)
	switch os.Getenv("E2E_PROVIDER") {
	case "", "local":
		local = NewLocalProvider()
		testenv.Setup(envfuncs.CreateCluster(local, clusterName))
		testenv.Finish(envfuncs.DestroyCluster(clusterName))
	case "kind":
		setup, err := kindSetup()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		testenv.Setup(setup...)
		testenv.Finish(kindFinish()...)
	case "node":
		if err := node.Check(); err != nil {
			if errors.Is(err, node.ErrSkip) {
				fmt.Fprintf(os.Stderr, "SKIP: E2E_PROVIDER=node: %v\n", err)
				os.Exit(0)
			}
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		onNode = &NodeProvider{}
		testenv.Setup(envfuncs.CreateCluster(onNode, clusterName))
		// The framework only logs a failed finish step: keep the teardown's
		// verdict (the machine as the node found it) for the exit code.
		testenv.Finish(func(ctx context.Context, _ *envconf.Config) (context.Context, error) {
			teardownErr = onNode.Destroy(ctx)
			return ctx, teardownErr
		})
	default:
		fmt.Fprintf(os.Stderr, "E2E_PROVIDER=%q: use local, kind or node\n", os.Getenv("E2E_PROVIDER"))
		os.Exit(2)
	}
	code := testenv.Run(m)
	if teardownErr != nil {
		fmt.Fprintf(os.Stderr, "FAIL: teardown: %v\n", teardownErr)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
