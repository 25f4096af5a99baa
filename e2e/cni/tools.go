//go:build tools

// Package tools pins the upstream programs built from this module: Multus' thin plugin and
// ib-sriov-cni (with the probe files of testdata/overlay, see e2e/toolchain.py).
package tools

import (
	_ "github.com/k8snetworkplumbingwg/ib-sriov-cni/cmd/ib-sriov-cni"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
)
