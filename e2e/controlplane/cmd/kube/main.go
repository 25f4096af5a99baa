// Command kube is the e2e control plane in one multi-call binary (as hyperkube was): etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kubectl, each exactly as its own
// upstream main runs it, at the versions this module's go.mod pins (k8s.io/kubernetes and the
// etcd server that tag pins). One binary links the packages the five share once instead of
// five times.
//
// It dispatches on the name it was started as (the toolchain puts a symlink named for each tool
// beside it), or on its first argument:
//
//	kube-apiserver --etcd-servers=...      (argv[0] is the symlink)
//	kube kubectl get nodes                 (the tool as first argument)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	_ "time/tzdata" // CronJob time zones (kube-apiserver's and kube-controller-manager's mains)

	"go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's main: the client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// Each entry is the body of that tool's upstream main (k8s.io/kubernetes/cmd/<tool>/*.go,
// go.etcd.io/etcd/server/v3's etcdmain), returning the exit code.
var tools = map[string]func() int{
	"etcd": func() int {
		etcdmain.Main(os.Args)
		return 0
	},
	"kube-apiserver": func() int {
		return cli.Run(apiserver.NewAPIServerCommand())
	},
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int {
		return cli.Run(scheduler.NewSchedulerCommand())
	},
	"kubectl": func() int {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream's main
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := tools[name]; !ok && len(os.Args) > 1 {
		if _, ok := tools[os.Args[1]]; ok {
			name = os.Args[1]
			os.Args = os.Args[1:] // the tool sees itself as argv[0], its own flags after it
		}
	}
	run, ok := tools[name]
	if !ok {
		names := make([]string, 0, len(tools))
		for n := range tools {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: %s TOOL [ARGS...], or start it as TOOL (a symlink); TOOL is one of: %s\n",
			name, strings.Join(names, ", "))
		os.Exit(2)
	}
	os.Exit(run())
}
