// Command pulumi-language-python is a small Python language host for the e2e suite.
//
// Upstream's host lives in its own module (github.com/pulumi/pulumi/sdk/python/cmd/
// pulumi-language-python/v3) with no tags; the module proxy answers 403 for it (README.md,
// "The real engine against a local control plane"), so it cannot be built here. This host does the part of its job that
// `pulumi preview/up/refresh/destroy` and `--policy-pack` need, the same way upstream's main.go
// does it: Run starts the Python SDK's own `pulumi-language-python-exec` script (copied next to
// this binary from the sdk/v3 module zip at the pinned SDK version) in the project's virtualenv
// (Pulumi.yaml runtime.options.virtualenv) with the engine's arguments and config in the
// environment; RunPlugin starts a policy pack as `python -m pulumi.policy <args> <dir>` behind
// the SDK's PolicyProxy, which hands the pack its stack configuration, and a component provider
// (PulumiPlugin.yaml, runtime python) as `python <dir> <args>`. For `pulumi package add`
// (packages.go): GeneratePackage writes a Python SDK with the engine's own pkg/v3/codegen/python,
// Link adds it to the program's requirements.txt, and InstallDependencies installs from local
// paths only (`pip install --no-index`): nothing is downloaded. `pulumi about` details are left
// unimplemented.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	sdk "github.com/pulumi/pulumi/sdk/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/contract"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// version is stamped by e2e/toolchain.py (-X main.version=...).
var version = "dev"

// The exit code by which pulumi-language-python-exec says it already showed the user an
// actionable message (sdk/python/cmd/pulumi-language-python-exec).
const userActionableExit = 32

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	_ = flag.String("tracing", "", "ignored (no tracing here)")
	executor := flag.String("use-executor", "", "the exec script (default: pulumi-language-python-exec beside this binary)")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	execPath := *executor
	if execPath == "" {
		self, err := os.Executable()
		if err != nil {
			cmdutil.Exit(fmt.Errorf("could not determine current executable: %w", err))
		}
		execPath = filepath.Join(filepath.Dir(self), "pulumi-language-python-exec")
	}
	if _, err := os.Stat(execPath); err != nil {
		cmdutil.Exit(fmt.Errorf("missing executor %s: %w", execPath, err))
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	cancelChannel := make(chan bool)
	go func() {
		<-ctx.Done()
		cancel()
		close(cancelChannel)
	}()
	host := &pythonHost{exec: execPath}
	if args := flag.Args(); len(args) > 0 {
		host.engineAddress = args[0]
		if err := rpcutil.Healthcheck(ctx, host.engineAddress, 5*time.Minute, cancel); err != nil {
			cmdutil.Exit(fmt.Errorf("could not start health check host RPC server: %w", err))
		}
	}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancelChannel,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, host)
			return nil
		},
	})
	if err != nil {
		cmdutil.Exit(fmt.Errorf("could not start language host RPC server: %w", err))
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		cmdutil.Exit(fmt.Errorf("language host RPC stopped serving: %w", err))
	}
}

type pythonHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	exec          string
	engineAddress string
}

// options reads the runtime options of Pulumi.yaml / PulumiPolicy.yaml (virtualenv, toolchain).
func options(info *pulumirpc.ProgramInfo, isPlugin bool) (toolchain.PythonOptions, error) {
	opts := toolchain.PythonOptions{Root: info.RootDirectory, ProgramDir: info.ProgramDirectory}
	m := info.GetOptions().AsMap()
	if v, ok := m["virtualenv"]; ok {
		s, ok := v.(string)
		if !ok {
			return opts, errors.New("virtualenv option must be a string")
		}
		opts.Virtualenv = s
	}
	if v, ok := m["toolchain"]; ok && v != "pip" {
		return opts, fmt.Errorf("toolchain %v: this e2e language host runs pip virtualenvs only", v)
	}
	opts.Toolchain = toolchain.Pip
	if isPlugin && opts.Virtualenv == "" {
		opts.Virtualenv = "venv" // upstream's default for plugins
	}
	return opts, nil
}

func (h *pythonHost) Handshake(
	ctx context.Context, req *pulumirpc.LanguageHandshakeRequest,
) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.engineAddress = req.EngineAddress
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *pythonHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

// GetRequiredPackages names no packages: every plugin is installed before the run (automatic
// plugin acquisition is off), and the engine loads the Kubernetes provider at the version the
// SDK registers resources with.
func (h *pythonHost) GetRequiredPackages(
	context.Context, *pulumirpc.GetRequiredPackagesRequest,
) (*pulumirpc.GetRequiredPackagesResponse, error) {
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *pythonHost) GetRequiredPlugins(
	context.Context, *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *pythonHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	opts, err := options(req.Info, false)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}
	args := []string{h.exec}
	add := func(k, v string) {
		if v != "" {
			args = append(args, "--"+k, v)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engineAddress)
	add("project", req.GetProject())
	add("root_directory", req.GetInfo().RootDirectory)
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", strconv.FormatBool(req.GetDryRun()))
	add("parallel", strconv.Itoa(int(req.GetParallel())))
	add("organization", req.GetOrganization())
	args = append(args, req.Info.EntryPoint)
	args = append(args, req.GetArgs()...)

	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return nil, err
	}
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	if cfg := req.GetConfig(); cfg != nil {
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		env = append(env, "PULUMI_CONFIG="+string(b))
	}
	secretKeys := req.GetConfigSecretKeys()
	if secretKeys == nil {
		secretKeys = []string{}
	}
	b, err := json.Marshal(secretKeys)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(env, "PULUMI_CONFIG_SECRET_KEYS="+string(b))

	if err := cmd.Run(); err != nil {
		contract.IgnoreError(os.Stdout.Sync())
		contract.IgnoreError(os.Stderr.Sync())
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.ExitStatus() == userActionableExit {
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited with non-zero exit code: %d", exitErr.ExitCode())}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("problem executing program (could not run language executor): %v", err)}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// RunPlugin runs a Python plugin: a component provider (kind resource, packages.go) or a policy
// pack (kind analyzer).
func (h *pythonHost) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	switch req.Kind {
	case string(apitype.ResourcePlugin):
		return runProvider(req, server)
	case string(apitype.AnalyzerPlugin):
		return runPolicyPack(req, server)
	}
	return fmt.Errorf("this e2e language host runs component providers and policy packs, not %s plugins", req.Kind)
}

// runPolicyPack runs a Python policy pack (kind analyzer) as upstream does: `python -u -m
// pulumi.policy <args> <pack dir>` in the pack's own virtualenv, working directory the pack,
// behind sdk.PolicyProxy so that the pack gets the stack's configuration in its environment.
func runPolicyPack(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	ctx := server.Context()
	opts, err := options(req.Info, true)
	if err != nil {
		return err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	args := append([]string{"-u", "-m", "pulumi.policy"}, req.Args...)
	args = append(args, req.Info.ProgramDirectory)
	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()
	cmd.Dir = req.Info.ProgramDirectory
	proxy, stdout, err := sdk.NewPolicyProxy(ctx, stdout)
	if err != nil {
		return fmt.Errorf("could not start policy pack proxy: %w", err)
	}
	cfg, err := proxy.AwaitConfiguration(ctx)
	if err != nil {
		return fmt.Errorf("could not get stack configuration: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if cfg != nil {
		set := func(k, v string) {
			if v != "" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		set("PULUMI_ORGANIZATION", cfg.Organization)
		set("PULUMI_PROJECT", cfg.Project)
		set("PULUMI_STACK", cfg.Stack)
		set("PULUMI_DRY_RUN", strconv.FormatBool(cfg.DryRun))
		if cfg.Config != nil {
			b, err := json.Marshal(cfg.Config)
			if err != nil {
				return err
			}
			set("PULUMI_CONFIG", string(b))
		}
	}
	cmd.Env = append(cmd.Env, req.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("problem executing policy pack: %w", err)
	}
	if err := proxy.Attach(ctx, cmd); err != nil {
		return fmt.Errorf("could not attach policy pack proxy: %w", err)
	}
	return closer.Close()
}
