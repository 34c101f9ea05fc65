// Package bench holds the driver's benchmarks and the small helpers they
// use to turn what they observe into figures.
//
// The benchmarks run on the local control plane (package test/cluster) with
// the real MetalLB controller, the reference core in-process and the
// driver's four binaries as separate processes, each as its own
// ServiceAccount. They print figures and ratios (claims per second, latency
// percentiles, handoff times, memory per controller) and never assert on
// speed: they fail only when the system does not converge at all.
//
//	make bench
package bench
