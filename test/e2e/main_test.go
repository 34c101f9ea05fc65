// Package e2e is the end-to-end suite, on sigs.k8s.io/e2e-framework. By
// default it runs locally: the local control plane with the real MetalLB
// controller, the reference core, and the driver's four binaries as separate
// processes, two replicas each with leader election, as the chart deploys
// them. E2E_PROVIDER=kind runs the portable features on a kind cluster with
// the chart installed instead (for CI machines with a container engine).
//
// E2E_REPEAT (default 1) repeats the restart and failover features.
package e2e

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
)

var (
	testenv env.Environment
	local   *LocalProvider
	repeat  = 1
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
		testenv.Setup(kindSetup()...)
		testenv.Finish(kindFinish()...)
	default:
		fmt.Fprintf(os.Stderr, "E2E_PROVIDER=%q: use local or kind\n", os.Getenv("E2E_PROVIDER"))
		os.Exit(2)
	}
	os.Exit(testenv.Run(m))
}
