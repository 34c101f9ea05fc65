//go:build tools

// Package tools pins Envoy Gateway's controller for hack/build-tools.sh.
package tools

import _ "github.com/envoyproxy/gateway/cmd/envoy-gateway"
