//go:build tools

// Package tools pins the MetalLB controller this module builds.
package tools

import _ "go.universe.tf/metallb/controller"
