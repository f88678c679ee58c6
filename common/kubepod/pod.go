package kubepod

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"path/filepath"
	"strconv"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of Config.
const (
	DefaultNodeName       = "harness-node"
	DefaultMemoryCapacity = 32 << 30
	seccompProfileRoot    = "/var/lib/kubelet/seccomp"
	kubeletPodsDir        = "/var/lib/kubelet/pods"
	sandboxesDir          = "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes"
)

// DefaultHugePageSizes are the page sizes of a typical x86 node, in the order
// the kubelet lists them from /sys/kernel/mm/hugepages.
var DefaultHugePageSizes = []string{"1GB", "2MB"}

// Config describes the node the kubelet runs on; the zero value is a
// cgroupfs node named harness-node with 32 GiB and 1GB and 2MB hugepages.
type Config struct {
	NodeName       string
	CgroupDriver   CgroupDriver
	MemoryCapacity int64
	HugePageSizes  []string
	RuntimeHandler string
}

// WithDefaults fills the unset fields of cfg with the defaults.
func (cfg Config) WithDefaults() Config {
	if cfg.NodeName == "" {
		cfg.NodeName = DefaultNodeName
	}
	if cfg.CgroupDriver == "" {
		cfg.CgroupDriver = CgroupfsDriver
	}
	if cfg.MemoryCapacity == 0 {
		cfg.MemoryCapacity = DefaultMemoryCapacity
	}
	if cfg.HugePageSizes == nil {
		cfg.HugePageSizes = DefaultHugePageSizes
	}
	return cfg
}

// Kind is the role of a container in its pod.
type Kind int

const (
	// InitContainer runs to completion before the next one starts.
	InitContainer Kind = iota
	// SidecarContainer is an init container with restartPolicy Always: it
	// starts in init order and keeps running beside the app containers.
	SidecarContainer
	// AppContainer is a regular container of spec.containers.
	AppContainer
)

func (k Kind) String() string {
	switch k {
	case InitContainer:
		return "init"
	case SidecarContainer:
		return "sidecar"
	case AppContainer:
		return "app"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Pod is a pod as the runtime knows it: its sandbox and its containers in the
// order the kubelet starts them.
type Pod struct {
	Manifest       *v1.Pod
	QOS            v1.PodQOSClass
	ID             string
	CgroupParent   string
	RuntimeHandler string
	// Labels and Annotations of the CRI PodSandboxConfig.
	Labels      map[string]string
	Annotations map[string]string
	// Resources is the pod-level CRI resources of the sandbox config.
	Resources LinuxContainerResources
	// Spec is the sandbox (pause) container's OCI spec.
	Spec       *rspec.Spec
	Containers []*Container
}

// Container is a container as containerd creates it, before NRI.
type Container struct {
	Name     string
	Kind     Kind
	ID       string
	Manifest *v1.Container
	// Resources is what the kubelet sent in CreateContainer.
	Resources LinuxContainerResources
	// Labels and Annotations of the CRI ContainerConfig (plus containerd's kind label).
	Labels         map[string]string
	Annotations    map[string]string
	SeccompProfile *api.SecurityProfile
	CDIDevices     []string
	// Spec is the OCI spec containerd generates, before NRI adjusts it.
	Spec *rspec.Spec
}

// Container returns the container named name, or nil.
func (p *Pod) Container(name string) *Container {
	for _, c := range p.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Convert turns a parsed manifest into the sandbox and containers that the
// kubelet and containerd's CRI plugin would create for it. Identifiers are
// derived from names, so the same manifest always gives the same ids.
func (cfg Config) Convert(manifest *v1.Pod) (*Pod, error) {
	cfg = cfg.WithDefaults()
	pod := manifest.DeepCopy()
	ApplyDefaults(pod)
	if pod.UID == "" {
		pod.UID = staticPodUID(pod, cfg.NodeName)
	}
	parent, err := CgroupParent(pod, cfg.CgroupDriver)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	p := &Pod{
		Manifest:       pod,
		QOS:            QOSClass(pod),
		ID:             hashID("sandbox", pod.Namespace, pod.Name, string(pod.UID)),
		CgroupParent:   parent,
		RuntimeHandler: cfg.RuntimeHandler,
		Labels:         podLabels(pod),
		Annotations:    maps.Clone(pod.Annotations),
		Resources:      SandboxResources(pod),
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Spec = sandboxSpec(p, cfg)

	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		kind := InitContainer
		if IsSidecar(pod, c) {
			kind = SidecarContainer
		}
		ctr, err := newContainer(p, c, kind, cfg)
		if err != nil {
			return nil, err
		}
		p.Containers = append(p.Containers, ctr)
	}
	for i := range pod.Spec.Containers {
		ctr, err := newContainer(p, &pod.Spec.Containers[i], AppContainer, cfg)
		if err != nil {
			return nil, err
		}
		p.Containers = append(p.Containers, ctr)
	}
	return p, nil
}

// staticPodUID follows the kubelet's static pod uid (pkg/kubelet/config/common.go
// applyDefaults): an md5 of the pod and the node name, as hex.
func staticPodUID(pod *v1.Pod, nodeName string) types.UID {
	data, _ := json.Marshal(pod) // a v1.Pod always marshals
	sum := md5.Sum(append(data, nodeName...))
	return types.UID(hex.EncodeToString(sum[:]))
}

// hashID gives a 64-hex-digit id like containerd's, derived from parts.
func hashID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// podLabels mirrors the kubelet's newPodLabels.
func podLabels(pod *v1.Pod) map[string]string {
	labels := maps.Clone(pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
	return labels
}

func hostname(pod *v1.Pod, cfg Config) string {
	switch {
	case pod.Spec.HostNetwork:
		return cfg.NodeName
	case pod.Spec.Hostname != "":
		return pod.Spec.Hostname
	case len(pod.Name) > 63:
		return pod.Name[:63]
	}
	return pod.Name
}

// namespaces mirrors containerd's namespace options: the pod shares network,
// IPC and UTS through the sandbox; host* settings drop the namespace;
// hostUsers: false adds a user namespace (its uid/gid mappings, which NRI
// does not carry, are left out).
func namespaces(pod *v1.Pod, sandbox bool) []rspec.LinuxNamespace {
	var ns []rspec.LinuxNamespace
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		ns = append(ns, rspec.LinuxNamespace{Type: rspec.UserNamespace})
	}
	if !pod.Spec.HostPID && (sandbox || !shareProcessNamespace(pod)) {
		ns = append(ns, rspec.LinuxNamespace{Type: rspec.PIDNamespace})
	}
	if !pod.Spec.HostIPC {
		ns = append(ns, rspec.LinuxNamespace{Type: rspec.IPCNamespace})
	}
	ns = append(ns, rspec.LinuxNamespace{Type: rspec.UTSNamespace}, rspec.LinuxNamespace{Type: rspec.MountNamespace})
	if !pod.Spec.HostNetwork {
		ns = append(ns, rspec.LinuxNamespace{Type: rspec.NetworkNamespace})
	}
	return ns
}

func shareProcessNamespace(pod *v1.Pod) bool {
	return pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace
}

func sandboxSpec(p *Pod, cfg Config) *rspec.Spec {
	pod := p.Manifest
	annotations := map[string]string{
		AnnotationContainerType:    ContainerTypeSandbox,
		AnnotationSandboxID:        p.ID,
		AnnotationSandboxName:      pod.Name,
		AnnotationSandboxNamespace: pod.Namespace,
		AnnotationSandboxUID:       string(pod.UID),
		AnnotationSandboxLogDir:    filepath.Join("/var/log/pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		AnnotationRuntimeHandler:   cfg.RuntimeHandler,
	}
	maps.Copy(annotations, sandboxResourceAnnotations(p.Resources))
	adj := -998 // containerd's sandbox (pause) OOM score adjustment
	spec := &rspec.Spec{
		Version:     rspec.Version,
		Process:     &rspec.Process{Args: []string{"/pause"}, Cwd: "/", Env: []string{DefaultPathEnv}, OOMScoreAdj: &adj},
		Root:        &rspec.Root{Path: "rootfs", Readonly: true},
		Hostname:    hostname(pod, cfg),
		Annotations: annotations,
		Linux: &rspec.Linux{
			CgroupsPath: CgroupsPath(p.CgroupParent, p.ID, cfg.CgroupDriver),
			Namespaces:  namespaces(pod, true),
		},
	}
	shares := uint64(MilliCPUToShares(0))
	spec.Linux.Resources = &rspec.LinuxResources{CPU: &rspec.LinuxCPU{Shares: &shares}}
	return spec
}

func newContainer(p *Pod, c *v1.Container, kind Kind, cfg Config) (*Container, error) {
	pod := p.Manifest
	res, err := ContainerResources(pod, c, cfg.MemoryCapacity, cfg.HugePageSizes)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctr := &Container{
		Name:      c.Name,
		Kind:      kind,
		ID:        hashID("container", p.ID, c.Name, "0"),
		Manifest:  c,
		Resources: res,
		Labels: map[string]string{
			LabelPodName:        pod.Name,
			LabelPodNamespace:   pod.Namespace,
			LabelPodUID:         string(pod.UID),
			LabelContainerName:  c.Name,
			LabelContainerdKind: ContainerTypeContainer,
		},
		Annotations:    containerAnnotations(pod, c),
		SeccompProfile: seccompProfile(pod, c),
	}
	env, err := containerEnv(pod, c, cfg)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	mounts, err := containerMounts(p, c)
	if err != nil {
		return nil, fmt.Errorf("converting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctr.Spec = containerSpec(p, ctr, env, mounts, cfg)
	return ctr, nil
}

// containerAnnotations mirrors the kubelet's newContainerAnnotations.
func containerAnnotations(pod *v1.Pod, c *v1.Container) map[string]string {
	data, _ := json.Marshal(c) // a v1.Container always marshals
	h := fnv.New32a()
	h.Write(data)
	grace := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	path := c.TerminationMessagePath
	if path == "" {
		path = v1.TerminationMessagePathDefault
	}
	policy := c.TerminationMessagePolicy
	if policy == "" {
		policy = v1.TerminationMessageReadFile
	}
	return map[string]string{
		AnnotationContainerHash:          strconv.FormatUint(uint64(h.Sum32()), 16),
		AnnotationRestartCount:           "0",
		AnnotationTerminationMessage:     path,
		AnnotationTerminationPolicy:      string(policy),
		AnnotationTerminationGracePeriod: strconv.FormatInt(grace, 10),
	}
}

// seccompProfile mirrors the kubelet's getSeccompProfile: the container's
// setting beats the pod's; without either the kubelet (seccompDefault off)
// asks for Unconfined.
func seccompProfile(pod *v1.Pod, c *v1.Container) *api.SecurityProfile {
	var sp *v1.SeccompProfile
	if pod.Spec.SecurityContext != nil {
		sp = pod.Spec.SecurityContext.SeccompProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		sp = c.SecurityContext.SeccompProfile
	}
	if sp == nil {
		return &api.SecurityProfile{ProfileType: api.SecurityProfile_UNCONFINED}
	}
	switch sp.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &api.SecurityProfile{ProfileType: api.SecurityProfile_RUNTIME_DEFAULT}
	case v1.SeccompProfileTypeLocalhost:
		ref := ""
		if sp.LocalhostProfile != nil {
			ref = filepath.Join(seccompProfileRoot, *sp.LocalhostProfile)
		}
		return &api.SecurityProfile{ProfileType: api.SecurityProfile_LOCALHOST, LocalhostRef: ref}
	}
	return &api.SecurityProfile{ProfileType: api.SecurityProfile_UNCONFINED}
}

// containerEnv mirrors containerd's environment (default PATH, HOSTNAME) followed
// by the kubelet's makeEnvironmentVariables for literal values and the
// downward-API fields a static pod can use.
func containerEnv(pod *v1.Pod, c *v1.Container, cfg Config) ([]string, error) {
	env := []string{DefaultPathEnv, "HOSTNAME=" + hostname(pod, cfg)}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("container %q env %q: valueFrom other than fieldRef is not supported: expected a value or a fieldRef", c.Name, e.Name)
			}
			switch path := e.ValueFrom.FieldRef.FieldPath; path {
			case "metadata.name":
				value = pod.Name
			case "metadata.namespace":
				value = pod.Namespace
			case "metadata.uid":
				value = string(pod.UID)
			case "spec.nodeName":
				value = cfg.NodeName
			default:
				return nil, fmt.Errorf("container %q env %q: fieldRef %q is not supported: expected metadata.name, metadata.namespace, metadata.uid or spec.nodeName", c.Name, e.Name, path)
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

// containerMounts mirrors containerd's default Linux mounts, the sandbox
// files it binds (hosts, hostname, resolv.conf, shm), the kubelet's
// termination log and the pod's emptyDir and hostPath volumes.
func containerMounts(p *Pod, c *v1.Container) ([]rspec.Mount, error) {
	pod := p.Manifest
	sandboxDir := filepath.Join(sandboxesDir, p.ID)
	podDir := filepath.Join(kubeletPodsDir, string(pod.UID))
	bind := func(src, dst string, ro bool) rspec.Mount {
		mode := "rw"
		if ro {
			mode = "ro"
		}
		return rspec.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "rprivate", mode}}
	}
	// A privileged container gets sysfs and cgroupfs read-write.
	sysMode := "ro"
	if Privileged(c) {
		sysMode = "rw"
	}
	mounts := []rspec.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", sysMode}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", sysMode}},
		bind(filepath.Join(sandboxDir, "hosts"), "/etc/hosts", false),
		bind(filepath.Join(sandboxDir, "hostname"), "/etc/hostname", false),
		bind(filepath.Join(sandboxDir, "resolv.conf"), "/etc/resolv.conf", false),
		bind(filepath.Join(sandboxDir, "shm"), "/dev/shm", false),
		bind(filepath.Join(podDir, "containers", c.Name, "termination-log"), "/dev/termination-log", false),
	}
	volumes := map[string]v1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("container %q volumeMount %q: no such volume in spec.volumes", c.Name, vm.Name)
		}
		var src string
		switch {
		case v.EmptyDir != nil:
			src = filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", v.Name)
		case v.HostPath != nil:
			src = v.HostPath.Path
		default:
			return nil, fmt.Errorf("container %q volume %q: only emptyDir and hostPath volumes are supported: expected one of them", c.Name, v.Name)
		}
		if vm.SubPath != "" {
			src = filepath.Join(src, vm.SubPath)
		}
		mounts = append(mounts, bind(src, vm.MountPath, vm.ReadOnly))
	}
	return mounts, nil
}

func containerSpec(p *Pod, ctr *Container, env []string, mounts []rspec.Mount, cfg Config) *rspec.Spec {
	pod, c := p.Manifest, ctr.Manifest
	args := append(append([]string{}, c.Command...), c.Args...)
	if len(args) == 0 {
		// The image's entrypoint, which the harness does not have.
		args = []string{c.Image}
	}
	cwd := c.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	var user rspec.User
	for _, sc := range []*int64{podRunAs(pod, true), containerRunAs(c, true)} {
		if sc != nil {
			user.UID = uint32(*sc)
		}
	}
	for _, sc := range []*int64{podRunAs(pod, false), containerRunAs(c, false)} {
		if sc != nil {
			user.GID = uint32(*sc)
		}
	}
	if pod.Spec.SecurityContext != nil {
		for _, g := range pod.Spec.SecurityContext.SupplementalGroups {
			user.AdditionalGids = append(user.AdditionalGids, uint32(g))
		}
	}
	adj := int(ctr.Resources.OOMScoreAdj)
	spec := &rspec.Spec{
		Version: rspec.Version,
		Process: &rspec.Process{
			Args:        args,
			Env:         env,
			Cwd:         cwd,
			User:        user,
			OOMScoreAdj: &adj,
		},
		Root:     &rspec.Root{Path: "rootfs"},
		Hostname: hostname(pod, cfg),
		Mounts:   mounts,
		Annotations: map[string]string{
			AnnotationContainerType:    ContainerTypeContainer,
			AnnotationSandboxID:        p.ID,
			AnnotationSandboxName:      pod.Name,
			AnnotationSandboxNamespace: pod.Namespace,
			AnnotationSandboxUID:       string(pod.UID),
			AnnotationContainerName:    c.Name,
			AnnotationImageName:        c.Image,
		},
		Linux: &rspec.Linux{
			CgroupsPath: CgroupsPath(p.CgroupParent, ctr.ID, cfg.CgroupDriver),
			Namespaces:  namespaces(pod, false),
		},
	}
	WithResources(spec, ctr.Resources)
	// containerd's default device rule denies every device (runc adds the
	// default ones); a privileged container's allows them all.
	spec.Linux.Resources.Devices = []rspec.LinuxDeviceCgroup{{Allow: Privileged(c), Access: "rwm"}}
	return spec
}

// Privileged reports whether the container asks to be privileged. Like
// containerd, the harness then leaves its seccomp profile out and opens
// sysfs, cgroupfs and every device (the host's device nodes, which
// containerd also adds, are left out).
func Privileged(c *v1.Container) bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
}

func podRunAs(pod *v1.Pod, uid bool) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	if uid {
		return pod.Spec.SecurityContext.RunAsUser
	}
	return pod.Spec.SecurityContext.RunAsGroup
}

func containerRunAs(c *v1.Container, uid bool) *int64 {
	if c.SecurityContext == nil {
		return nil
	}
	if uid {
		return c.SecurityContext.RunAsUser
	}
	return c.SecurityContext.RunAsGroup
}
