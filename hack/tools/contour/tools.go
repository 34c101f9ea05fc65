//go:build tools

// Package tools pins Contour, whose gateway provisioner is the second
// Gateway API implementation of the e2e feature `gateway`, for
// hack/build-tools.sh.
package tools

import _ "github.com/projectcontour/contour/cmd/contour"
