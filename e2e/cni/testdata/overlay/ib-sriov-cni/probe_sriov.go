// Added to ib-sriov-cni's package sriov by the build's overlay (e2e/cni/overlay.json): the
// upstream manager with a given kernel, for the probe in package main. Nothing upstream changes.

package sriov

import "github.com/k8snetworkplumbingwg/ib-sriov-cni/pkg/types"

// NewSriovManagerForProbe is NewSriovManager with the netlink and PCI calls the probe records.
func NewSriovManagerForProbe(nLink types.NetlinkManager, pci types.PciUtils) types.Manager {
	return &sriovManager{nLink: nLink, utils: pci}
}
