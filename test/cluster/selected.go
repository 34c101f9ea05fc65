package cluster

import (
	"fmt"
	"os"
	"testing"
)

// Integration tests, the ones that need the control plane, live in files
// named *_integration_test.go that carry the build constraint
// `//go:build integration`: `make test` builds them (-tags integration),
// `make test-unit` and a plain `go test` leave them out and run the pure
// tests alone, with no control plane.

// Main is the TestMain of a package with integration tests (it lives in one
// of them): run starts what the tests need and runs m. It exits with the
// code run returns, or with 1 after printing run's error.
func Main(m *testing.M, run func(*testing.M) (int, error)) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}
