// Command pulumi-resource-kubernetes serves the Pulumi Kubernetes provider.
//
// Upstream's own main (provider/cmd/pulumi-resource-kubernetes/main.go) embeds schema-embed.json
// and terraform-mapping-embed.json, which its generate.go writes from the committed schema.json
// (with the release version set) and terraform-mapping.json; they are not in the module zip, so a
// plain `go build` of upstream's main fails. This main is the same call with files that
// e2e/toolchain.py writes the same way from the module's own schema.json before building.
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
