// Command etcd is etcd's own server entry point at the version Kubernetes pins
// (go.etcd.io/etcd/server/v3, see go.mod): the same etcdmain.Main the upstream binary calls.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
