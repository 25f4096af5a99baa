//go:build tools

// Package tools pins KWOK's controller for `go build sigs.k8s.io/kwok/cmd/kwok` (kwok v0.8.0's
// go.mod has no replace directives, so none are copied here). A module of its own: its k8s.io
// libraries (v0.36.x) must not meet the control plane's staging replaces.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
