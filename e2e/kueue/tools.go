//go:build tools

// Package tools pins the Kueue manager for `go build sigs.k8s.io/kueue/cmd/kueue`
// (kueue v0.19.2's go.mod has no replace directives, so none are copied here).
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
