package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/nri-suite/nri-suite/common/kubepod"
	"github.com/nri-suite/nri-suite/deployments"
)

// CRIO runs CRI-O v1.34 with runc and conmon, on sockets and directories of
// its own. CRI-O cannot import an image archive, so the images reach it
// through a loopback-only registry (crane) that a private registries.conf
// maps their references to, whatever their domain; the registry lives as
// long as the runtime.
//
// Quirks of CRI-O on these hosts, which have no CAP_SYS_RESOURCE:
//   - CRI-O passes the kubelet's oom_score_adj to runc unchanged (containerd
//     clamps it with restrict_oom_score_adj). Guaranteed pods ask for -997,
//     which runc cannot set ("failed to update /proc/self/oom_score_adj:
//     permission denied"), so they never start: see CRIOGuaranteedSkip. So
//     do static pods of priority class system-node-critical, which the
//     kubelet gives -997 whatever their QoS class: see CRIONodeCriticalSkip.
//   - The infra container gets a hard-coded -998 as well: pods need PID
//     namespace mode CONTAINER, so that drop_infra_ctr leaves it out. The
//     kubelet does that unless a pod shares its process namespace.
//   - CRI-O sees hugetlb in /proc/cgroups and passes the kubelet's hugepage
//     limits to runc, which fails when hugetlb has no v1 hierarchy (it sits
//     on the v2 side of these hybrid hosts): see CgroupV1Controllers.
type CRIO struct {
	criDaemon
	env      RuntimeEnv
	paths    CRIOPaths
	registry *process
}

// CRIOGuaranteedSkip is why a test that needs a Guaranteed pod skips on
// CRI-O when the host refuses negative oom_score_adj values.
const CRIOGuaranteedSkip = "CRI-O passes the Guaranteed oom_score_adj -997 to runc, which these hosts refuse without CAP_SYS_RESOURCE"

// CRIONodeCriticalSkip is why a system-node-critical pod cannot run on
// CRI-O when the host refuses negative oom_score_adj values: the kubelet
// counts every static pod (all of the sandbox's) as critical.
const CRIONodeCriticalSkip = "CRI-O passes the oom_score_adj -997 the kubelet gives a static system-node-critical pod to runc, which these hosts refuse without CAP_SYS_RESOURCE"

// CannotRun implements podRefuser: a Guaranteed or system-node-critical pod
// cannot run where negative oom_score_adj values are refused.
func (c *CRIO) CannotRun(pod *corev1.Pod) string {
	if canLowerOOMScoreAdj() {
		return ""
	}
	defaulted := pod.DeepCopy()
	kubepod.ApplyDefaults(defaulted) // as the kubelet does: limits without requests are requests
	switch {
	case kubepod.QOSClass(defaulted) == corev1.PodQOSGuaranteed:
		return CRIOGuaranteedSkip
	case pod.Spec.PriorityClassName == "system-node-critical":
		return CRIONodeCriticalSkip
	}
	return ""
}

// NewCRIO returns a CRI-O runtime; Start configures and starts it.
func NewCRIO() *CRIO { return &CRIO{} }

// CRIOPaths are the private locations of one CRI-O instance.
type CRIOPaths struct {
	Config            string // main crio.conf
	DropInDir         string // crio.conf.d, where NRI and CDI are configured
	StorageConf       string // containers-storage.conf, so that /etc/containers never applies
	RegistriesConf    string
	RegistriesConfDir string // empty, so that /etc/containers/registries.conf.d never applies
	Policy            string // signature policy
	PolicyDir         string // per-namespace policies (none)
	Root              string // image and container storage
	RunRoot           string
	Socket            string
	LogDir            string
	VersionFile       string
	VersionPersist    string
	CleanShutdown     string
	Namespaces        string // pinned namespaces
	Exits             string
	Attach            string // short: conmon's attach sockets live below it
	Hooks             string
	Keys              string
	IrqBalance        string
	Temp              string // TMPDIR and big_files_temporary_dir
	RuncRoot          string
	CNI               string // CNI bin/ and net.d/ (RuntimeEnv.CNIDir); never /etc/cni
	RuncPath          string
	ConmonPath        string
	PinnsPath         string
	PauseRef          string
	CacheBins         string
}

func crioPaths(dir string, cache Cache, pause string) CRIOPaths {
	return CRIOPaths{
		Config:            filepath.Join(dir, "crio.conf"),
		DropInDir:         filepath.Join(dir, "crio.conf.d"),
		StorageConf:       filepath.Join(dir, "storage.conf"),
		RegistriesConf:    filepath.Join(dir, "registries.conf"),
		RegistriesConfDir: filepath.Join(dir, "registries.conf.d"),
		Policy:            filepath.Join(dir, "policy.json"),
		PolicyDir:         filepath.Join(dir, "policies"),
		Root:              filepath.Join(dir, "root"),
		RunRoot:           filepath.Join(dir, "state"),
		Socket:            filepath.Join(dir, "crio.sock"),
		LogDir:            filepath.Join(dir, "pod-logs"),
		VersionFile:       filepath.Join(dir, "version"),
		VersionPersist:    filepath.Join(dir, "version-persist"),
		CleanShutdown:     filepath.Join(dir, "clean.shutdown"),
		Namespaces:        filepath.Join(dir, "ns"),
		Exits:             filepath.Join(dir, "exits"),
		Attach:            filepath.Join(dir, "a"),
		Hooks:             filepath.Join(dir, "hooks.d"),
		Keys:              filepath.Join(dir, "keys"),
		IrqBalance:        filepath.Join(dir, "irqbalance"),
		Temp:              filepath.Join(dir, "tmp"),
		RuncRoot:          filepath.Join(dir, "runc"),
		CNI:               filepath.Join(dir, "cni"),
		RuncPath:          cache.Bin("runc"),
		ConmonPath:        cache.Bin("conmon"),
		PinnsPath:         cache.Bin("pinns"),
		PauseRef:          pause,
		CacheBins:         filepath.Join(cache.Root, "bin"),
	}
}

// Name implements Runtime.
func (c *CRIO) Name() string { return "crio" }

// Binaries implements Runtime.
func (c *CRIO) Binaries() []string { return []string{"crio", "pinns", "conmon", "runc", "crane"} }

// Endpoint implements Runtime.
func (c *CRIO) Endpoint() string { return "unix://" + c.paths.Socket }

// HostDirs implements Runtime: containers/image keeps its blob info cache
// in /var/lib/containers/cache for root whatever the storage says (CRI-O
// has no setting for it). TestCRIOHostPaths checks that no other default
// path appears.
func (c *CRIO) HostDirs() []string { return []string{"/var/lib/containers"} }

// CgroupV1Controllers names the v1 hierarchies CRI-O needs: the kubelet
// passes hugepage limits for every container, and CRI-O hands them to runc
// whenever the kernel has hugetlb, mounted or not.
func (c *CRIO) CgroupV1Controllers() []string { return []string{"hugetlb"} }

// Start implements Runtime.
func (c *CRIO) Start(ctx context.Context, env RuntimeEnv) error {
	c.env = env
	c.paths = crioPaths(env.Dir, env.Cache, env.PauseImage)
	if env.CNIDir != "" {
		c.paths.CNI = env.CNIDir
	}
	for _, dir := range []string{c.paths.DropInDir, c.paths.RegistriesConfDir, c.paths.PolicyDir, c.paths.Root,
		c.paths.RunRoot, c.paths.LogDir, c.paths.Namespaces, c.paths.Exits, c.paths.Attach, c.paths.Hooks,
		c.paths.Keys, c.paths.Temp, c.paths.RuncRoot, filepath.Join(c.paths.CNI, "bin"), filepath.Join(c.paths.CNI, "net.d")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating CRI-O directory: %w", err)
		}
	}
	addr, err := c.startRegistry(ctx)
	if err != nil {
		return err
	}
	registries, err := CRIORegistriesConf(addr, env.Images)
	if err != nil {
		return err
	}
	policy, err := CRIOSignaturePolicy(addr, env.Images)
	if err != nil {
		return err
	}
	dropIn, err := CRIONRIDropIn(env.NRI, env.CDISpecDirs)
	if err != nil {
		return fmt.Errorf("configuring CRI-O: %w", err)
	}
	files := []struct{ path, content string }{
		{c.paths.Config, CRIOConfig(c.paths)},
		{filepath.Join(c.paths.DropInDir, "50-nri-cdi.conf"), dropIn},
		{c.paths.StorageConf, CRIOStorageConf(c.paths)},
		{c.paths.RegistriesConf, registries},
		{c.paths.Policy, policy},
	}
	if env.BlockIOConfig != "" {
		files = append(files, struct{ path, content string }{filepath.Join(c.paths.DropInDir, "60-blockio.conf"),
			fmt.Sprintf("[crio.runtime]\nblockio_config_file = %q\n", env.BlockIOConfig)})
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.content), 0o644); err != nil {
			return fmt.Errorf("writing CRI-O configuration: %w", err)
		}
	}
	if err := c.pushImages(ctx, addr); err != nil {
		return err
	}
	err = c.launch(ctx, command{
		name: "crio",
		argv: []string{env.Cache.Bin("crio"), "--config", c.paths.Config, "--config-dir", c.paths.DropInDir,
			"--registries-conf", c.paths.RegistriesConf, "--registries-conf-dir", c.paths.RegistriesConfDir},
		env: []string{"CONTAINERS_STORAGE_CONF=" + c.paths.StorageConf, "TMPDIR=" + c.paths.Temp,
			"PATH=" + c.paths.CacheBins + ":" + os.Getenv("PATH")},
		logPath: filepath.Join(env.Dir, "crio.log"),
		netns:   env.Netns,
	}, env.Cache.Bin("crictl"), c.Endpoint(), env.Log)
	if err != nil {
		return err
	}
	return c.pullImages(ctx)
}

// Stop implements Runtime; the registry goes with the runtime.
func (c *CRIO) Stop(ctx context.Context, grace time.Duration) error {
	err := c.criDaemon.Stop(ctx, grace)
	if c.registry != nil {
		c.registry.stop(grace)
	}
	return err
}

// registryPortPattern finds the port in crane's "serving on port N".
var registryPortPattern = regexp.MustCompile(`serving on port (\d+)`)

// startRegistry starts crane's in-memory registry on a free loopback port,
// in CRI-O's network namespace, and returns its address.
func (c *CRIO) startRegistry(ctx context.Context) (string, error) {
	logPath := filepath.Join(c.env.Dir, "registry.log")
	p, err := startProcess(command{name: "registry", logPath: logPath, netns: c.env.Netns,
		argv: []string{c.env.Cache.Bin("crane"), "registry", "serve", "--address", "127.0.0.1:0"}})
	if err != nil {
		return "", err
	}
	c.registry = p
	var port string
	err = p.waitFor(ctx, "the image registry", func(context.Context) error {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return fmt.Errorf("reading registry log: %w", err)
		}
		m := registryPortPattern.FindSubmatch(data)
		if m == nil {
			return errors.New("no port in the registry's log yet")
		}
		port = string(m[1])
		return nil
	})
	if err != nil {
		return "", err
	}
	addr := "127.0.0.1:" + port
	c.env.Log.WithFields(logrus.Fields{"pid": p.PID(), "addr": addr}).Info("image registry started")
	return addr, nil
}

// pushImages pushes every image archive to the registry, under its
// reference's repository path.
func (c *CRIO) pushImages(ctx context.Context, addr string) error {
	for _, img := range c.env.Images {
		ref, err := ParseImageRef(img.Ref)
		if err != nil {
			return err
		}
		if err := c.pushImage(ctx, img.Archive, addr+"/"+ref.Path+":"+ref.Tag); err != nil {
			return err
		}
	}
	return nil
}

// pushImage pushes an OCI archive as the layout it holds: crane pushes a
// file only as a docker-style tarball (manifest.json), which `make images`
// does not write, and a layout keeps the manifest digest of index.json.
func (c *CRIO) pushImage(ctx context.Context, archive, target string) error {
	layout, err := os.MkdirTemp(c.paths.Temp, "layout-")
	if err != nil {
		return fmt.Errorf("pushing image %s: %w", archive, err)
	}
	defer os.RemoveAll(layout)
	if _, err := runTool(ctx, nil, "tar", "-xf", archive, "-C", layout); err != nil {
		return fmt.Errorf("unpacking image archive %s: %w", archive, err)
	}
	push := command{netns: c.env.Netns, argv: []string{c.env.Cache.Bin("crane"), "push", "--insecure", layout, target}}
	if _, err := runTool(ctx, nil, push.fullArgv()...); err != nil {
		return fmt.Errorf("pushing image %s to the loopback registry as %s: %w", archive, target, err)
	}
	return nil
}

// pullImages pulls every image through CRI-O under its own reference
// (registries.conf redirects it to the loopback registry) and checks that
// CRI-O lists it by that name.
func (c *CRIO) pullImages(ctx context.Context) error {
	crictl := []string{c.env.Cache.Bin("crictl"), "--runtime-endpoint", c.Endpoint(), "--image-endpoint", c.Endpoint()}
	for _, img := range c.env.Images {
		if _, err := runTool(ctx, nil, append(crictl, "pull", img.Ref)...); err != nil {
			return fmt.Errorf("pulling image %s into CRI-O: %w", img.Ref, err)
		}
		out, err := runTool(ctx, nil, append(crictl, "inspecti", "-o", "json", img.Ref)...)
		if err != nil {
			return fmt.Errorf("inspecting image %s in CRI-O: %w", img.Ref, err)
		}
		tags, err := parseRepoTags(out)
		if err != nil {
			return fmt.Errorf("inspecting image %s in CRI-O: %w", img.Ref, err)
		}
		if !slices.Contains(tags, img.Ref) {
			return fmt.Errorf("pulling image %s into CRI-O: the image is tagged %s, not with its reference", img.Ref, strings.Join(tags, ", "))
		}
	}
	return nil
}

// parseRepoTags returns status.repoTags of crictl inspecti's JSON.
func parseRepoTags(out []byte) ([]string, error) {
	var in struct {
		Status struct {
			RepoTags []string `json:"repoTags"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &in); err != nil {
		return nil, fmt.Errorf("decoding crictl inspecti output: %w", err)
	}
	return in.Status.RepoTags, nil
}

// ImageRef is a fully qualified image reference split into its parts:
// "localhost/nri-suite/busybox:latest" is Domain "localhost", Path
// "nri-suite/busybox" and Tag "latest".
type ImageRef struct {
	Domain string
	Path   string
	Tag    string
}

// Repository is the reference without its tag.
func (r ImageRef) Repository() string { return r.Domain + "/" + r.Path }

// What a domain, a path and a tag may hold: lowercase path components, as
// the distribution spec requires; a domain may carry a port.
var (
	imageDomainPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?$`)
	imagePathPattern   = regexp.MustCompile(`^[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$`)
	imageTagPattern    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// ParseImageRef splits a fully qualified, tagged reference (domain/path:tag,
// no digest). The sandbox's images must be qualified: a short name would
// make CRI-O search registries.
func ParseImageRef(ref string) (ImageRef, error) {
	bad := func(why string) (ImageRef, error) {
		return ImageRef{}, fmt.Errorf("image reference %q: %s, expected domain/path:tag like %s", ref, why, BusyboxImage)
	}
	if strings.Contains(ref, "@") {
		return bad("has a digest")
	}
	domain, rest, ok := strings.Cut(ref, "/")
	if !ok || rest == "" {
		return bad("has no domain")
	}
	if !imageDomainPattern.MatchString(domain) {
		return bad(fmt.Sprintf("domain %q is not a host name with an optional port", domain))
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return bad("has no tag")
	}
	path, tag := rest[:i], rest[i+1:]
	if !imagePathPattern.MatchString(path) {
		return bad(fmt.Sprintf("path %q is not lowercase components separated by /", path))
	}
	if !imageTagPattern.MatchString(tag) {
		return bad(fmt.Sprintf("tag %q is not a valid tag", tag))
	}
	return ImageRef{Domain: domain, Path: path, Tag: tag}, nil
}

// imageRepositories returns the distinct parsed references of images.
func imageRepositories(images []Image) ([]ImageRef, error) {
	var refs []ImageRef
	seen := map[string]bool{}
	for _, img := range images {
		ref, err := ParseImageRef(img.Ref)
		if err != nil {
			return nil, err
		}
		if !seen[ref.Repository()] {
			seen[ref.Repository()] = true
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

// CRIORegistriesConf returns a registries.conf (v2) that sends each image's
// repository to the same path on the loopback registry at addr, over plain
// HTTP, and disables short-name search. The pulled image keeps the name
// that was asked for, which is what the kubelet's manifests use.
func CRIORegistriesConf(addr string, images []Image) (string, error) {
	refs, err := imageRepositories(images)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("unqualified-search-registries = []\nshort-name-mode = \"disabled\"\n")
	for _, ref := range refs {
		fmt.Fprintf(&b, "\n[[registry]]\nprefix = %q\nlocation = %q\ninsecure = true\n", ref.Repository(), addr+"/"+ref.Path)
	}
	return b.String(), nil
}

// CRIOSignaturePolicy returns a policy that accepts unsigned images from
// the sandbox's repositories and the loopback registry only, and rejects
// everything else.
func CRIOSignaturePolicy(addr string, images []Image) (string, error) {
	refs, err := imageRepositories(images)
	if err != nil {
		return "", err
	}
	accept := []map[string]string{{"type": "insecureAcceptAnything"}}
	scopes := map[string]any{addr: accept}
	for _, ref := range refs {
		scopes[ref.Repository()] = accept
	}
	policy := map[string]any{
		"default":    []map[string]string{{"type": "reject"}},
		"transports": map[string]any{"docker": scopes},
	}
	data, err := json.MarshalIndent(policy, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding signature policy: %w", err)
	}
	return string(data) + "\n", nil
}

// CRIOStorageConf returns a containers-storage.conf with the same private
// root, run root and driver as crio.conf, so that no other storage.conf
// (with additional image stores or options) applies.
func CRIOStorageConf(p CRIOPaths) string {
	return fmt.Sprintf("[storage]\ndriver = \"overlay\"\ngraphroot = %q\nrunroot = %q\n", p.Root, p.RunRoot)
}

// CRIOConfig returns the main crio.conf of a private CRI-O: every path
// under its own directory; runc from the cache with the cgroupfs driver and
// conmon in the pod's cgroup; no infra container for pods without a shared
// PID namespace; no host port mapping (no iptables here); the local pause
// image; and signature and registry settings for the loopback registry.
// NRI and CDI come from the drop-in (CRIONRIDropIn).
func CRIOConfig(p CRIOPaths) string {
	return fmt.Sprintf(`[crio]
root = %[1]q
runroot = %[2]q
storage_driver = "overlay"
log_dir = %[3]q
version_file = %[4]q
version_file_persist = %[5]q
clean_shutdown_file = %[6]q
# After a SIGKILL the shutdown was unclean: do not check or wipe the storage,
# whose containers are still running.
internal_repair = false

[crio.api]
listen = %[7]q
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
drop_infra_ctr = true
disable_hostport_mapping = true
pinns_path = %[8]q
namespaces_dir = %[9]q
container_exits_dir = %[10]q
container_attach_socket_dir = %[11]q
hooks_dir = [%[12]q]
decryption_keys_path = %[13]q
irqbalance_config_file = %[14]q
irqbalance_config_restore_file = "disable"

# conmon and conmon_cgroup are deprecated: monitor_* of the handler replace them.
[crio.runtime.runtimes.runc]
runtime_path = %[15]q
runtime_type = "oci"
runtime_root = %[16]q
monitor_path = %[17]q
monitor_cgroup = "pod"

# A second handler (a RuntimeClass's), the same runc under another name, so
# that tests can scope policies by runtime handler.
[crio.runtime.runtimes.%[24]s]
runtime_path = %[15]q
runtime_type = "oci"
runtime_root = %[16]q
monitor_path = %[17]q
monitor_cgroup = "pod"

[crio.image]
pause_image = %[18]q
signature_policy = %[19]q
signature_policy_dir = %[20]q
big_files_temporary_dir = %[21]q

[crio.network]
network_dir = %[22]q
plugin_dirs = [%[23]q]
`, p.Root, p.RunRoot, p.LogDir, p.VersionFile, p.VersionPersist, p.CleanShutdown,
		p.Socket, p.PinnsPath, p.Namespaces, p.Exits, p.Attach, p.Hooks, p.Keys, p.IrqBalance,
		p.RuncPath, p.RuncRoot, p.ConmonPath,
		p.PauseRef, p.Policy, p.PolicyDir, p.Temp,
		filepath.Join(p.CNI, "net.d"), filepath.Join(p.CNI, "bin"), AltRuntimeHandler)
}

// CRIONRIDropIn returns the crio.conf.d drop-in that the suite ships
// (deployments/crio), with its NRI socket, plugin directories and CDI spec
// dirs moved to the sandbox's: nothing else differs from the shipped file,
// whose timeouts apply (see deployments.DropIn).
func CRIONRIDropIn(nri NRIConfig, cdiSpecDirs []string) (string, error) {
	return deployments.DropIn(deployments.CRIO, nri.deploymentPaths(cdiSpecDirs))
}
