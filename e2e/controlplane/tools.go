//go:build tools

// Package tools pins the upstream commands this module builds, so `go mod tidy` keeps their
// dependencies: kube-apiserver and kube-controller-manager are built straight from
// k8s.io/kubernetes/cmd/..., etcd from our cmd/etcd (etcd's own main lives in a module that
// Kubernetes does not pin).
package tools

import (
	_ "k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)
