package main

// What `pulumi package add` and a program using a component package need from the language host
// (Pulumi 3.274.0, pkg/cmd/pulumi/packages/packages.go InstallPackage and packageworkspace): run
// the package's provider (RunPlugin, kind resource), install the plugin's and the program's
// dependencies, generate the SDK and link it into the program. Upstream's host does the same with
// these toolchain calls (sdk/python/cmd/pulumi-language-python); this one never reaches the
// network: InstallDependencies installs from local paths only, with the virtualenv's own build
// tools, so a program's virtualenv must already hold what its requirements name.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
)

// runProvider runs a component provider as upstream's host runs a plugin directory without a
// buildable pyproject: `python <plugin dir> <engine args>` in the plugin's virtualenv
// (PulumiPlugin.yaml runtime.options.virtualenv, default `venv`), working directory req.Pwd. The
// provider prints its port on stdout, which the stream hands to the engine.
func runProvider(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	opts, err := options(req.Info, true)
	if err != nil {
		return err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	args := append([]string{req.Info.ProgramDirectory}, req.Args...)
	cmd, err := tc.Command(server.Context(), args...)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()
	cmd.Dir = req.Pwd
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, req.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok {
				return server.Send(&pulumirpc.RunPluginResponse{
					Output: &pulumirpc.RunPluginResponse_Exitcode{Exitcode: int32(ws.ExitStatus())}, //nolint:gosec
				})
			}
		}
		return fmt.Errorf("problem executing plugin program (could not run language executor): %w", err)
	}
	return closer.Close()
}

// InstallDependencies checks the virtualenv and installs the program's requirements from local
// paths only. A plugin's virtualenv is used as it is (its requirements are the repository's, in
// a virtualenv made before the run).
func (h *pythonHost) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	opts, err := options(req.Info, req.IsPlugin)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeInstallDependenciesStreams(server, req.IsTerminal)
	if err != nil {
		return err
	}
	defer closer.Close()
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	ctx := server.Context()
	if err := tc.ValidateVenv(ctx); err != nil {
		return fmt.Errorf("this e2e language host creates no virtualenv and downloads nothing: %w", err)
	}
	requirements := filepath.Join(req.Info.ProgramDirectory, "requirements.txt")
	if _, err := os.Stat(requirements); req.IsPlugin || errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdout, "Using the virtualenv %s as it is\n", opts.Virtualenv)
		return closer.Close()
	}
	// --no-index: nothing from the network; --no-build-isolation: a local SDK is built with the
	// virtualenv's own setuptools and wheel instead of ones pip would download.
	cmd, err := tc.ModuleCommand(ctx, "pip", "install", "--no-index", "--no-build-isolation", "-r", "requirements.txt")
	if err != nil {
		return err
	}
	cmd.Dir = req.Info.ProgramDirectory
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pip install --no-index -r %s: %w", requirements, err)
	}
	return closer.Close()
}

// GeneratePackage writes the Python SDK of a package schema, as upstream's host does.
func (h *pythonHost) GeneratePackage(
	ctx context.Context, req *pulumirpc.GeneratePackageRequest,
) (*pulumirpc.GeneratePackageResponse, error) {
	loader, err := schema.NewLoaderClient(req.LoaderTarget)
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	var spec schema.PackageSpec
	if err := json.Unmarshal([]byte(req.Schema), &spec); err != nil {
		return nil, err
	}
	cached := schema.NewCachedLoader(loader)
	pkg, diags, err := schema.BindSpec(spec, cached, schema.ValidationOptions{AllowDanglingReferences: true})
	if err != nil {
		return nil, err
	}
	rpcDiags := plugin.HclDiagnosticsToRPCDiagnostics(diags)
	if diags.HasErrors() {
		return &pulumirpc.GeneratePackageResponse{Diagnostics: rpcDiags}, nil
	}
	files, err := python.GeneratePackage("pulumi-language-python", pkg, req.ExtraFiles, cached)
	if err != nil {
		return nil, err
	}
	for name, data := range files {
		out := filepath.Join(req.Directory, name)
		if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
			return nil, fmt.Errorf("could not create output directory %s: %w", filepath.Dir(name), err)
		}
		if err := os.WriteFile(out, data, 0o600); err != nil {
			return nil, fmt.Errorf("could not write output file %s: %w", name, err)
		}
	}
	return &pulumirpc.GeneratePackageResponse{Diagnostics: rpcDiags}, nil
}

// Link adds each generated SDK's folder to the program's requirements.txt (the pip toolchain's
// own LinkPackages), replacing an earlier line for the same package, and says how to import it.
func (h *pythonHost) Link(ctx context.Context, req *pulumirpc.LinkRequest) (*pulumirpc.LinkResponse, error) {
	opts, err := options(req.Info, false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	packages := map[string]string{}
	var lines []string
	for _, dep := range req.Packages {
		name := dep.GetPackage().GetName()
		if p := dep.GetPackage().GetParameterization(); p != nil && p.GetName() != "" {
			name = p.GetName()
		}
		module := python.PyPack("", name)
		packages[module] = dep.Path
		lines = append(lines, fmt.Sprintf("  import %s as %s", module, strings.ReplaceAll(name, "-", "_")))
	}
	if err := tc.LinkPackages(ctx, packages); err != nil {
		return nil, err
	}
	sort.Strings(lines)
	return &pulumirpc.LinkResponse{
		ImportInstructions: "You can then import the SDK in your Python code with:\n\n" + strings.Join(lines, "\n") + "\n",
	}, nil
}
