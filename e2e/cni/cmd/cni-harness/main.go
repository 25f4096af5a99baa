// Command cni-harness runs upstream's own node-side code on what the e2e tests send it: one JSON
// request on stdin, one JSON answer on stdout. Nothing here decides a verdict; it reports what
// Multus (k8snetworkplumbingwg/multus-cni v4.3.0) and libcni do with the input, and the Python
// tests compare that with what the platform's admission policy said.
//
// Requests ("op"):
//
//	networks  {"cases": [{"namespace", "annotations"}]} -> per case, Multus' k8sclient.GetPodNetwork(pod):
//	          the network-selection elements it parsed (its own JSON), or its error, or the panic.
//	client    {"kubeconfig", "namespace", "podName", "nad"} -> k8sclient.GetK8sClient(kubeconfig) (what the
//	          thin plugin's CmdAdd calls first), then multus.GetPod and ClientInfo.GetNetAttachDef with it.
//	delegate  {"nadConfig", "element", "deviceID", "resourceName", "ifName", "netns", "containerID",
//	          "pod": {"namespace", "name", "uid"}, "binDir", "cacheDir"} -> Multus' types.LoadDelegateNetConf
//	          and types.CreateCNIRuntimeConf for that NAD and selection element, then libcni's AddNetwork
//	          as Multus' confAdd calls it: the delegate plugin in binDir is executed for real.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/skel"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/k8sclient"
	"gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus"
	"gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/types"
)

type request struct {
	Op string `json:"op"`
	// networks
	Cases []struct {
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"cases"`
	// client
	Kubeconfig string `json:"kubeconfig"`
	Namespace  string `json:"namespace"`
	PodName    string `json:"podName"`
	NAD        string `json:"nad"`
	// delegate
	NADConfig    string                         `json:"nadConfig"`
	Element      *types.NetworkSelectionElement `json:"element"`
	DeviceID     string                         `json:"deviceID"`
	ResourceName string                         `json:"resourceName"`
	IfName       string                         `json:"ifName"`
	Netns        string                         `json:"netns"`
	ContainerID  string                         `json:"containerID"`
	Pod          struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid"`
	} `json:"pod"`
	BinDir   string `json:"binDir"`
	CacheDir string `json:"cacheDir"`
}

type parsed struct {
	Networks  []*types.NetworkSelectionElement `json:"networks"`
	NoNetwork bool                             `json:"noNetwork"`
	Error     string                           `json:"error,omitempty"`
	Panic     string                           `json:"panic,omitempty"`
}

// getPodNetwork is Multus' own call, with a panic (a nil element: `[null]`) reported as such:
// in the thin plugin it ends the process and fails the CNI ADD.
func getPodNetwork(pod *v1.Pod) (out parsed) {
	defer func() {
		if r := recover(); r != nil {
			out = parsed{Panic: fmt.Sprint(r)}
		}
	}()
	networks, err := k8sclient.GetPodNetwork(pod)
	if err != nil {
		if _, ok := err.(*k8sclient.NoK8sNetworkError); ok {
			return parsed{NoNetwork: true}
		}
		return parsed{Error: err.Error()}
	}
	return parsed{Networks: networks}
}

func networks(req request) any {
	out := make([]parsed, 0, len(req.Cases))
	for _, c := range req.Cases {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: c.Namespace, Annotations: c.Annotations}}
		out = append(out, getPodNetwork(pod))
	}
	return map[string]any{"results": out}
}

func client(req request) any {
	ci, err := k8sclient.GetK8sClient(req.Kubeconfig, nil)
	if err != nil {
		return map[string]any{"stage": "client", "error": err.Error()}
	}
	if ci == nil {
		return map[string]any{"stage": "client", "error": "no kubeconfig: Multus would not talk to the API server"}
	}
	args := &types.K8sArgs{
		K8S_POD_NAMESPACE: cnitypes.UnmarshallableString(req.Namespace),
		K8S_POD_NAME:      cnitypes.UnmarshallableString(req.PodName),
	}
	pod, err := multus.GetPod(ci, args, false)
	if err != nil {
		return map[string]any{"stage": "pod", "error": err.Error()}
	}
	if pod == nil {
		return map[string]any{"stage": "pod", "error": "pod not found"}
	}
	res := map[string]any{"stage": "done", "pod": map[string]any{
		"namespace": pod.Namespace, "name": pod.Name, "uid": string(pod.UID), "annotations": pod.Annotations,
	}}
	if req.NAD != "" {
		nad, err := ci.GetNetAttachDef(req.Namespace, req.NAD)
		if err != nil {
			res["stage"], res["error"] = "nad", err.Error()
			return res
		}
		res["nad"] = map[string]any{"name": nad.Name, "config": nad.Spec.Config}
	}
	return res
}

func delegate(req request) any {
	d, err := types.LoadDelegateNetConf([]byte(req.NADConfig), req.Element, req.DeviceID, req.ResourceName)
	if err != nil {
		return map[string]any{"stage": "load", "error": err.Error()}
	}
	k8sArgs := &types.K8sArgs{
		K8S_POD_NAMESPACE:          cnitypes.UnmarshallableString(req.Pod.Namespace),
		K8S_POD_NAME:               cnitypes.UnmarshallableString(req.Pod.Name),
		K8S_POD_UID:                cnitypes.UnmarshallableString(req.Pod.UID),
		K8S_POD_INFRA_CONTAINER_ID: cnitypes.UnmarshallableString(req.ContainerID),
	}
	args := &skel.CmdArgs{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName}
	rt, _ := types.CreateCNIRuntimeConf(args, k8sArgs, req.IfName, nil, d)
	// Multus' confAdd (pkg/multus/multus.go): libcni with Multus' bin and cache directories.
	cniNet := libcni.NewCNIConfigWithCacheDir([]string{req.BinDir}, req.CacheDir, nil)
	conf, err := libcni.ConfFromBytes(d.Bytes)
	if err != nil {
		return map[string]any{"stage": "conf", "error": err.Error()}
	}
	res := map[string]any{
		"delegateBytes":  string(d.Bytes),
		"capabilityArgs": rt.CapabilityArgs,
		"args":           rt.Args,
	}
	result, err := cniNet.AddNetwork(context.Background(), conf, rt)
	if err != nil {
		res["stage"], res["error"] = "add", err.Error()
		return res
	}
	res["stage"], res["result"] = "done", result
	return res
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cni-harness: reading stdin:", err)
		os.Exit(2)
	}
	var req request
	if err := json.Unmarshal(raw, &req); err != nil {
		fmt.Fprintln(os.Stderr, "cni-harness: the request is not JSON:", err)
		os.Exit(2)
	}
	var out any
	switch req.Op {
	case "networks":
		out = networks(req)
	case "client":
		out = client(req)
	case "delegate":
		out = delegate(req)
	default:
		fmt.Fprintf(os.Stderr, "cni-harness: unknown op %q (networks, client, delegate)\n", req.Op)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "cni-harness: writing the answer:", err)
		os.Exit(2)
	}
}
