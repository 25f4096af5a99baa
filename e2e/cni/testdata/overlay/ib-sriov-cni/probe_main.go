// Added to ib-sriov-cni's package main by the build's overlay (e2e/cni/overlay.json), so that the
// plugin's own unexported code runs in the e2e suite without InfiniBand hardware. With
// $GPUAAS_IBSRIOV_PROBE set (JSON: {"report": path, "vfGUID": the GUID the host set on the VF}),
// a CNI ADD runs upstream's getNetConfNetns (config.LoadConf, getGUIDFromConf, the ib-kubernetes
// check, config.LoadDeviceInfo) on upstream's own fake sysfs (utils.CreateTmpSysFs: PF ib0 at
// 0000:af:00.1, VFs 0000:af:06.0 = ib1 and 0000:af:06.1 = ib2), then the real sriov manager's
// ApplyVFConfig with a recording netlink in place of the kernel, writes what happened to the
// report and answers with an empty result. Without the variable the binary is ib-sriov-cni.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/k8snetworkplumbingwg/ib-sriov-cni/pkg/sriov"
	"github.com/k8snetworkplumbingwg/ib-sriov-cni/pkg/utils"
)

type probeCall struct {
	Call string `json:"call"`
	Link string `json:"link"`
	VF   int    `json:"vf"`
	Arg  string `json:"arg,omitempty"`
}

type probeReport struct {
	Stdin       string      `json:"stdin"`
	Stage       string      `json:"stage"`
	Error       string      `json:"error,omitempty"`
	GUID        string      `json:"guid"`
	PKeyField   string      `json:"pkeyField"`
	DeviceID    string      `json:"deviceID"`
	Master      string      `json:"master"`
	VFID        int         `json:"vfID"`
	HostIFNames string      `json:"hostIFNames"`
	HostIFGUID  string      `json:"hostIFGUID"`
	VFGUIDAfter string      `json:"vfGUIDAfter"`
	Calls       []probeCall `json:"calls"`
}

// probeKernel is the kernel as ApplyVFConfig sees it: every call recorded, the VF's GUID kept.
type probeKernel struct {
	report *probeReport
	vfGUID net.HardwareAddr
}

func ipoibAddr(guid net.HardwareAddr) net.HardwareAddr {
	// An IPoIB hardware address: 4 bytes of QPN and flags, the 8-byte subnet prefix, the 8-byte GUID.
	return append(net.HardwareAddr{0x00, 0x00, 0x10, 0x49, 0xfe, 0x80, 0, 0, 0, 0, 0, 0}, guid...)
}

func (k *probeKernel) rec(call string, link netlink.Link, vf int, arg string) {
	name := ""
	if link != nil {
		name = link.Attrs().Name
	}
	k.report.Calls = append(k.report.Calls, probeCall{call, name, vf, arg})
}

func (k *probeKernel) LinkByName(name string) (netlink.Link, error) {
	k.rec("LinkByName", nil, -1, name)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if name != "ib0" {
		attrs.HardwareAddr = ipoibAddr(k.vfGUID)
	}
	return &netlink.Device{LinkAttrs: attrs}, nil
}
func (k *probeKernel) LinkSetUp(l netlink.Link) error   { k.rec("LinkSetUp", l, -1, ""); return nil }
func (k *probeKernel) LinkSetDown(l netlink.Link) error { k.rec("LinkSetDown", l, -1, ""); return nil }
func (k *probeKernel) LinkSetNsFd(l netlink.Link, fd int) error {
	k.rec("LinkSetNsFd", l, -1, fmt.Sprint(fd))
	return nil
}
func (k *probeKernel) LinkSetName(l netlink.Link, n string) error {
	k.rec("LinkSetName", l, -1, n)
	return nil
}
func (k *probeKernel) LinkSetVfState(l netlink.Link, vf int, s uint32) error {
	k.rec("LinkSetVfState", l, vf, fmt.Sprint(s))
	return nil
}
func (k *probeKernel) LinkSetVfPortGUID(l netlink.Link, vf int, g net.HardwareAddr) error {
	k.rec("LinkSetVfPortGUID", l, vf, g.String())
	k.vfGUID = g
	return nil
}
func (k *probeKernel) LinkSetVfNodeGUID(l netlink.Link, vf int, g net.HardwareAddr) error {
	k.rec("LinkSetVfNodeGUID", l, vf, g.String())
	return nil
}
func (k *probeKernel) LinkDelAltName(l netlink.Link, n string) error {
	k.rec("LinkDelAltName", l, -1, n)
	return nil
}
func (k *probeKernel) GetSriovNumVfs(ifName string) (int, error) { return 2, nil }
func (k *probeKernel) GetVFLinkNamesFromVFID(pf string, vf int) ([]string, error) {
	return []string{fmt.Sprintf("ib%d", vf+1)}, nil
}
func (k *probeKernel) GetPciAddress(ifName string, vf int) (string, error) {
	return fmt.Sprintf("0000:af:06.%d", vf), nil
}
func (k *probeKernel) RebindVf(pf, pci string) error {
	k.report.Calls = append(k.report.Calls, probeCall{"RebindVf", pf, -1, pci})
	return nil
}

func probeFail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "ib-sriov-cni probe: "+format+"\n", a...)
	os.Exit(code)
}

func runProbe(spec string) {
	var cfg struct {
		Report string `json:"report"`
		VFGUID string `json:"vfGUID"`
	}
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil || cfg.Report == "" {
		probeFail(2, "GPUAAS_IBSRIOV_PROBE must be JSON with a report path: %v", err)
	}
	vfGUID, err := net.ParseMAC(cfg.VFGUID)
	if err != nil || len(vfGUID) != 8 {
		probeFail(2, "vfGUID %q is not an 8-byte GUID: %v", cfg.VFGUID, err)
	}
	if os.Getenv("CNI_COMMAND") != "ADD" {
		os.Exit(0) // DEL, CHECK: nothing to probe
	}
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		probeFail(2, "reading stdin: %v", err)
	}
	report := &probeReport{Stdin: string(stdin), Stage: "conf"}
	write := func() {
		raw, _ := json.MarshalIndent(report, "", "  ")
		if err := os.WriteFile(cfg.Report, raw, 0o600); err != nil {
			probeFail(2, "writing the report: %v", err)
		}
	}
	if err := utils.CreateTmpSysFs(); err != nil {
		probeFail(2, "upstream's fake sysfs: %v", err)
	}
	defer func() { _ = utils.RemoveTmpSysFs() }()
	args := &skel.CmdArgs{
		ContainerID: os.Getenv("CNI_CONTAINERID"),
		Netns:       os.Getenv("CNI_NETNS"),
		IfName:      os.Getenv("CNI_IFNAME"),
		Args:        os.Getenv("CNI_ARGS"),
		Path:        os.Getenv("CNI_PATH"),
		StdinData:   stdin,
	}
	netConf, netns, err := getNetConfNetns(args)
	if err != nil {
		report.Error = err.Error()
		write()
		probeFail(1, "%v", err)
	}
	netns.Close()
	report.GUID, report.PKeyField, report.DeviceID = netConf.GUID, netConf.PKey, netConf.DeviceID
	report.Master, report.VFID, report.HostIFNames = netConf.Master, netConf.VFID, netConf.HostIFNames
	report.Stage = "apply"
	kernel := &probeKernel{report: report, vfGUID: vfGUID}
	err = sriov.NewSriovManagerForProbe(kernel, kernel).ApplyVFConfig(netConf)
	report.HostIFGUID, report.VFGUIDAfter = netConf.HostIFGUID, kernel.vfGUID.String()
	if err != nil {
		report.Error = err.Error()
		write()
		probeFail(1, "%v", err)
	}
	report.Stage = "done"
	write()
	if err := cnitypes.PrintResult(&current.Result{CNIVersion: current.ImplementedSpecVersion}, netConf.CNIVersion); err != nil {
		probeFail(1, "%v", err)
	}
	os.Exit(0)
}

func init() {
	if spec := os.Getenv("GPUAAS_IBSRIOV_PROBE"); spec != "" {
		runProbe(spec)
	}
}
