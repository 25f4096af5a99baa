//go:build tools

// Package tools pins Prometheus's own commands for `go build .../cmd/prometheus` and
// `.../cmd/promtool` (v0.316.0 is Prometheus 3.16.0; its go.mod has no replace directives).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
