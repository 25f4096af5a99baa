//go:build tools

// Package tools pins the Helm CLI for `go build helm.sh/helm/v3/cmd/helm`: v3.18.6, the Helm
// that pulumi-resource-kubernetes (e2e/k8sprovider) links, so a chart the e2e installs without
// the engine renders and installs as the provider would install it. A module of its own (the
// provider's go.sum lacks the CLI's own dependencies), with the same library versions.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
