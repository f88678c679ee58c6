package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/deployments"
)

// Containerd runs containerd v2 (config version 3) with the runc shim, on
// sockets and directories of its own.
type Containerd struct {
	criDaemon
	env   RuntimeEnv
	paths ContainerdPaths
}

// NewContainerd returns a containerd runtime; Start configures and starts it.
func NewContainerd() *Containerd { return &Containerd{} }

// ContainerdPaths are the private locations of one containerd instance.
type ContainerdPaths struct {
	Config    string // main config file
	DropInDir string // imported *.toml drop-ins
	Root      string
	State     string
	Temp      string // TMPDIR: idmapped overlay lowerdirs land here
	Socket    string
	RuncRoot  string
	ShimSock  string // shim socket dir; containerd limits it to 42 characters
	CNI       string // CNI bin/ and net.d/ (RuntimeEnv.CNIDir); never /etc/cni
	Opt       string
	RuncPath  string
	ShimPath  string
	PauseRef  string
	CacheBins string // prepended to PATH so that containerd finds its shim
}

// maxShimSocketDir is containerd's limit on socket_dir (unix socket paths).
const maxShimSocketDir = 42

func containerdPaths(dir string, cache Cache, pause string) ContainerdPaths {
	return ContainerdPaths{
		Config:    filepath.Join(dir, "config.toml"),
		DropInDir: filepath.Join(dir, "conf.d"),
		Root:      filepath.Join(dir, "root"),
		State:     filepath.Join(dir, "state"),
		Temp:      filepath.Join(dir, "tmp"),
		Socket:    filepath.Join(dir, "containerd.sock"),
		RuncRoot:  filepath.Join(dir, "runc"),
		ShimSock:  filepath.Join(dir, "s"),
		CNI:       filepath.Join(dir, "cni"),
		Opt:       filepath.Join(dir, "opt"),
		RuncPath:  cache.Bin("runc"),
		ShimPath:  cache.Bin("containerd-shim-runc-v2"),
		PauseRef:  pause,
		CacheBins: filepath.Join(cache.Root, "bin"),
	}
}

// Name implements Runtime.
func (c *Containerd) Name() string { return "containerd" }

// Binaries implements Runtime.
func (c *Containerd) Binaries() []string {
	return []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"}
}

// Endpoint implements Runtime.
func (c *Containerd) Endpoint() string { return "unix://" + c.paths.Socket }

// Start implements Runtime.
func (c *Containerd) Start(ctx context.Context, env RuntimeEnv) error {
	c.env = env
	c.paths = containerdPaths(env.Dir, env.Cache, env.PauseImage)
	if env.CNIDir != "" {
		c.paths.CNI = env.CNIDir
	}
	if len(c.paths.ShimSock) > maxShimSocketDir {
		return fmt.Errorf("configuring containerd: shim socket dir %s is longer than %d characters: use a shorter run dir base", c.paths.ShimSock, maxShimSocketDir)
	}
	// The state dir (and the run dir above it) holds the containers' rootfs
	// mounts, which the init of a user-namespaced container, running as an
	// unprivileged host uid, must traverse.
	if err := os.MkdirAll(c.paths.State, 0o711); err != nil {
		return fmt.Errorf("creating containerd directory: %w", err)
	}
	for _, dir := range []string{c.paths.DropInDir, c.paths.Root, c.paths.Temp, c.paths.RuncRoot,
		c.paths.ShimSock, filepath.Join(c.paths.CNI, "bin"), filepath.Join(c.paths.CNI, "net.d"), c.paths.Opt} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating containerd directory: %w", err)
		}
	}
	if err := os.WriteFile(c.paths.Config, []byte(ContainerdConfig(c.paths)), 0o644); err != nil {
		return fmt.Errorf("writing containerd config: %w", err)
	}
	dropIn := filepath.Join(c.paths.DropInDir, "50-nri-cdi.toml")
	content, err := ContainerdNRIDropIn(env.NRI, env.CDISpecDirs)
	if err != nil {
		return fmt.Errorf("configuring containerd: %w", err)
	}
	if err := os.WriteFile(dropIn, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing containerd NRI drop-in: %w", err)
	}
	if env.BlockIOConfig != "" {
		blockIO := fmt.Sprintf("[plugins.'io.containerd.service.v1.tasks-service']\n  blockio_config_file = %q\n", env.BlockIOConfig)
		if err := os.WriteFile(filepath.Join(c.paths.DropInDir, "60-blockio.toml"), []byte(blockIO), 0o644); err != nil {
			return fmt.Errorf("writing containerd block I/O drop-in: %w", err)
		}
	}
	err = c.launch(ctx, command{
		name:    "containerd",
		argv:    []string{env.Cache.Bin("containerd"), "--config", c.paths.Config, "--log-level", "info"},
		env:     []string{"TMPDIR=" + c.paths.Temp, "PATH=" + c.paths.CacheBins + ":" + os.Getenv("PATH")},
		logPath: filepath.Join(env.Dir, "containerd.log"),
		netns:   env.Netns,
	}, env.Cache.Bin("crictl"), c.Endpoint(), env.Log)
	if err != nil {
		return err
	}
	return c.importImages(ctx)
}

// HostDirs implements Runtime: with socket_dir and the runc root set, the
// only default path left is the FIFO dir that cio falls back to.
func (c *Containerd) HostDirs() []string { return []string{"/run/containerd"} }

// importImages loads the image archives into the CRI namespace (k8s.io) and
// checks that each arrived under its reference.
func (c *Containerd) importImages(ctx context.Context) error {
	ctr := []string{c.env.Cache.Bin("ctr"), "--address", c.paths.Socket, "--namespace", "k8s.io"}
	for _, img := range c.env.Images {
		if _, err := runTool(ctx, nil, append(ctr, "images", "import", img.Archive)...); err != nil {
			return fmt.Errorf("importing image %s into containerd: %w", img.Archive, err)
		}
	}
	out, err := runTool(ctx, nil, append(ctr, "images", "list", "--quiet")...)
	if err != nil {
		return fmt.Errorf("listing containerd images: %w", err)
	}
	have := strings.Fields(string(out))
	for _, img := range c.env.Images {
		if !slices.Contains(have, img.Ref) {
			return fmt.Errorf("importing image %s into containerd: reference %s is not listed after import (have %s)", img.Archive, img.Ref, strings.Join(have, ", "))
		}
	}
	return nil
}

// ContainerdConfig returns the main configuration (version 3) of a private
// containerd: its own root, state, sockets, shim socket and runc root; runc
// from the cache with the cgroupfs driver; the local pause image; and an
// import of the drop-in directory, where NRI and CDI are configured.
func ContainerdConfig(p ContainerdPaths) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
imports = [%[3]q]

[grpc]
  address = %[4]q

[ttrpc]
  address = %[5]q

[plugins.'io.containerd.cri.v1.runtime']
  # No CAP_SYS_RESOURCE on these hosts: never ask for a lower oom_score_adj.
  restrict_oom_score_adj = true
  # Pod network namespaces under the state dir, not the host's /run/netns.
  netns_mounts_under_state_dir = true

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q

  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[8]q
        Root = %[9]q
        SystemdCgroup = false

    # A second handler (a RuntimeClass's), the same runc under another name,
    # so that tests can scope policies by runtime handler.
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[13]s]
      runtime_type = 'io.containerd.runc.v2'

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.%[13]s.options]
        BinaryName = %[8]q
        Root = %[9]q
        SystemdCgroup = false

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[10]q

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'

[plugins.'io.containerd.internal.v1.opt']
  path = %[11]q

[plugins.'io.containerd.shim.v1.manager']
  socket_dir = %[12]q
`, p.Root, p.State, filepath.Join(p.DropInDir, "*.toml"), p.Socket, p.Socket+".ttrpc",
		filepath.Join(p.CNI, "bin"), filepath.Join(p.CNI, "net.d"), p.RuncPath, p.RuncRoot, p.PauseRef, p.Opt, p.ShimSock,
		AltRuntimeHandler)
}

// ContainerdNRIDropIn returns the containerd drop-in that the suite ships
// (deployments/containerd), with its NRI socket, plugin directories and CDI
// spec dirs moved to the sandbox's: nothing else differs from the shipped
// file, whose timeouts apply (see deployments.DropIn).
func ContainerdNRIDropIn(nri NRIConfig, cdiSpecDirs []string) (string, error) {
	return deployments.DropIn(deployments.Containerd, nri.deploymentPaths(cdiSpecDirs))
}
