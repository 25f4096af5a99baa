//go:build tools

// Package tools pins the Helm CLI for `go build helm.sh/helm/v3/cmd/helm` at v3.18.6, the Helm
// that pulumi-resource-kubernetes v4.25.0 links (e2e/k8sprovider/go.sum), so the chart the tests
// render is rendered as the provider renders it. A module of its own: its k8s.io libraries must
// not meet the control plane's staging replaces. The e2e suite renders HAMi's chart with it
// (`helm template --kube-version`); helm v3.18.6's go.mod has no replace directives to copy.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
