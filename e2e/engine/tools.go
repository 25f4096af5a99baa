//go:build tools

// Package tools pins the upstream command this module builds, so `go mod tidy` keeps its
// dependencies: the Pulumi CLI is built straight from pkg/v3/cmd/pulumi.
package tools

import (
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
)
