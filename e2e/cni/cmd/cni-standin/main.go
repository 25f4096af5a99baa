// Command cni-standin is a CNI plugin that stands in for the delegates Multus calls (the cluster
// network's plugin and ib-sriov-cni, which needs InfiniBand hardware): it records every call —
// the command, the environment the CNI spec defines and the exact network configuration it was
// given on stdin — as one JSON file per call in $GPUAAS_STANDIN_RECORD, and answers ADD with one
// interface in the pod's namespace and an address from a documentation range (RFC 5737).
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

type call struct {
	Command     string         `json:"command"`
	ContainerID string         `json:"containerID"`
	Netns       string         `json:"netns"`
	IfName      string         `json:"ifName"`
	Args        string         `json:"args"`
	Path        string         `json:"path"`
	Stdin       map[string]any `json:"stdin"`
	Raw         string         `json:"raw"`
}

func record(command string, args *skel.CmdArgs) (map[string]any, error) {
	dir := os.Getenv("GPUAAS_STANDIN_RECORD")
	if dir == "" {
		return nil, fmt.Errorf("cni-standin: GPUAAS_STANDIN_RECORD is not set")
	}
	var conf map[string]any
	if err := json.Unmarshal(args.StdinData, &conf); err != nil {
		return nil, fmt.Errorf("cni-standin: stdin is not a network configuration: %v", err)
	}
	c := call{command, args.ContainerID, args.Netns, args.IfName, args.Args, args.Path, conf, string(args.StdinData)}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%d-%s-%s.json", time.Now().UnixNano(), command, args.IfName)
	return conf, os.WriteFile(filepath.Join(dir, name), raw, 0o600)
}

// address gives each interface name its own address: net1 -> 192.0.2.1, eth0 -> 198.51.100.1.
func address(ifName string) *net.IPNet {
	if ifName == "eth0" {
		return &net.IPNet{IP: net.IPv4(198, 51, 100, 1), Mask: net.CIDRMask(24, 32)}
	}
	return &net.IPNet{IP: net.IPv4(192, 0, 2, 1), Mask: net.CIDRMask(24, 32)}
}

func add(args *skel.CmdArgs) error {
	conf, err := record("ADD", args)
	if err != nil {
		return err
	}
	v, _ := conf["cniVersion"].(string)
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: args.IfName, Sandbox: args.Netns}},
		IPs:        []*current.IPConfig{{Address: *address(args.IfName), Interface: current.Int(0)}},
	}
	return types.PrintResult(res, v)
}

func del(args *skel.CmdArgs) error {
	_, err := record("DEL", args)
	return err
}

func check(args *skel.CmdArgs) error {
	_, err := record("CHECK", args)
	return err
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: add, Del: del, Check: check}, version.All, "gpuaas e2e stand-in delegate")
}
