// Package nriplugin is the NRI side of the security plugin. At
// CreateContainer it refuses a container that policy says must run in a
// user namespace and has none (package userns), then chooses its seccomp
// profile (package profile) and hands the policy the seccomp store built to
// the runtime. At ValidateContainerAdjustment, after every other plugin
// adjusted the container, it judges their changes (package validator).
// Every rule's mode (enforce, audit, off) comes from the configuration, per
// namespace; each decision is logged once and counted by rule and outcome.
package nriplugin

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/common/quote"
	"github.com/nri-suite/nri-suite/plugins/security/config"
	"github.com/nri-suite/nri-suite/plugins/security/internal/hostns"
	"github.com/nri-suite/nri-suite/plugins/security/internal/privileged"
	"github.com/nri-suite/nri-suite/plugins/security/internal/profile"
	"github.com/nri-suite/nri-suite/plugins/security/internal/seccomp"
	"github.com/nri-suite/nri-suite/plugins/security/internal/userns"
	"github.com/nri-suite/nri-suite/plugins/security/internal/validator"
)

// Options are what the plugin needs besides the runner's Deps.
type Options struct {
	// Proc is the proc file system in which the host's namespaces are
	// found (/proc/1/ns/...).
	Proc string
	// NoValidator leaves validation of other plugins' adjustments out even
	// where the runtime supports it.
	NoValidator bool
}

// Plugin confines containers at creation and validates other plugins'
// adjustments, where the runtime's NRI calls validators.
type Plugin struct {
	id       config.PluginID
	validate bool
	log      *logrus.Entry
	metrics  *metrics
	host     hostns.Host
	arch     string
	// baseline is what the runtime default profile denies here, the
	// measure of other plugins' seccomp policies.
	baseline *seccomp.Baseline

	// lastOwn is what the plugin did to the container it created last.
	// NRI holds one lock from a container's CreateContainer to its
	// validation, so the validation that follows is that container's.
	ownMu   sync.Mutex
	lastOwn struct {
		id  string
		own validator.Own
	}

	mu        sync.RWMutex
	cfg       *config.Config
	store     *seccomp.Store
	validator *validator.Validator
	stopWatch context.CancelFunc
	runtime   string // "name version" as NRI reported it at registration
	// recentRuntime: the runtime's NRI applies seccomp policies and calls
	// validators (see minRecentNRI).
	recentRuntime bool
}

// New builds the plugin with the default configuration; Configure replaces it.
func New(deps plugin.Deps, opts Options) (*Plugin, error) {
	if err := plugin.CheckAbsPath("--proc", opts.Proc); err != nil {
		return nil, fmt.Errorf("create security plugin: %w", err)
	}
	p := &Plugin{id: config.NewPluginID(deps.Index, deps.Name), validate: !opts.NoValidator, log: deps.Log, host: hostns.ProcHost{Proc: opts.Proc},
		arch: goruntime.GOARCH, recentRuntime: true}
	var err error
	if p.baseline, err = seccomp.NewBaseline(p.arch, seccomp.DefaultCapabilities); err != nil {
		return nil, fmt.Errorf("create security plugin: %w", err)
	}
	if p.metrics, err = newMetrics(deps.Registry, deps.MetricsNamespace, p.profileCounts); err != nil {
		return nil, fmt.Errorf("create security plugin: registering metrics: %w", err)
	}
	if err := p.apply(config.Default()); err != nil {
		return nil, fmt.Errorf("create security plugin: %w", err)
	}
	return p, nil
}

// Configure implements plugin.Configurable: nothing of a bad configuration
// is applied.
func (p *Plugin) Configure(data []byte, source string) error {
	cfg, err := config.Parse(data, source)
	if err != nil {
		return err
	}
	if err := p.apply(cfg); err != nil {
		return fmt.Errorf("config %s: %w", source, err)
	}
	p.log.WithField("source", source).WithField("profile-dir", cfg.Seccomp.ProfileDir).Info("configured")
	return nil
}

// apply loads cfg's profiles into a new store, watches its directory, and
// replaces the running configuration and store with them.
func (p *Plugin) apply(cfg *config.Config) error {
	store, err := seccomp.NewStore(seccomp.Options{Dir: cfg.Seccomp.ProfileDir, ExtraRules: cfg.Seccomp.ExtraRules, Log: p.log})
	if errors.Is(err, seccomp.ErrNotDirectory) {
		return fmt.Errorf("seccomp.profile-dir: %w", err)
	}
	if err != nil {
		return fmt.Errorf("loading seccomp profiles: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.Seccomp.ProfileDir != "" {
		go func() {
			if err := store.Watch(ctx); err != nil && !errors.Is(err, context.Canceled) {
				p.log.WithError(err).WithField("profile-dir", cfg.Seccomp.ProfileDir).
					Error("stopped watching the seccomp profile directory; profiles are no longer reloaded")
			}
		}()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopWatch != nil {
		p.stopWatch()
	}
	p.cfg, p.store, p.stopWatch = cfg, store, cancel
	p.validator = validator.New(cfg.Validator, p.id, p.host, p.baseline)
	return nil
}

// SetRuntime implements plugin.RuntimeAware.
func (p *Plugin) SetRuntime(name, version string) {
	recent := recentNRI(name, version)
	p.mu.Lock()
	p.runtime, p.recentRuntime = name+" "+version, recent
	p.mu.Unlock()
	if !recent {
		p.log.WithField("runtime", name+" "+version).Warn("the runtime's NRI drops seccomp policies and calls no validators: " +
			"the seccomp rule audits where its mode is the built-in default, and refuses the containers it would confine where " +
			"rules.seccomp says enforce; other plugins' adjustments are not validated")
	}
}

// Events implements plugin.EventFilter: a runtime whose NRI predates
// validation refuses a plugin that subscribes to it.
func (p *Plugin) Events(implemented api.EventMask) api.EventMask {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.validate || !p.recentRuntime {
		implemented.Clear(api.Event_VALIDATE_CONTAINER_ADJUSTMENT)
	}
	return implemented
}

// FailClosed implements plugin.FailClosed: a container whose request the
// plugin did not answer was not checked, so the runtime must not create it
// (every rule is enforced by default; where none is, the cost is one
// request failed while the plugin hangs, which the kubelet retries).
func (p *Plugin) FailClosed() bool { return true }

// Close stops watching the profile directory.
func (p *Plugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopWatch != nil {
		p.stopWatch()
		p.stopWatch = nil
	}
	return nil
}

func (p *Plugin) profileCounts() (loaded, invalid int) {
	p.mu.RLock()
	store := p.store
	p.mu.RUnlock()
	loaded, invalid, _ = store.Status()
	return loaded, invalid
}

// CreateContainer refuses a container without a required user namespace or
// with host namespaces policy refuses, and gives the others their seccomp
// policy.
func (p *Plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	id := k8s.IdentityOf(pod, ctr)
	scope := config.Scope{Namespace: id.Namespace, Pod: id.Pod, RuntimeHandler: pod.GetRuntimeHandler()}
	if err := p.checkUserNamespace(id, scope, pod, ctr); err != nil {
		return nil, nil, err
	}
	if err := p.checkHostNamespaces(id, scope, ctr); err != nil {
		return nil, nil, err
	}
	if err := p.checkTolerateMissingPlugins(id, scope, pod); err != nil {
		return nil, nil, err
	}
	policy, own, err := p.confine(id, scope, pod, ctr)
	if err != nil {
		return nil, nil, err
	}
	p.remember(ctr.GetId(), own)
	if policy == nil {
		return nil, nil, nil
	}
	adjust := &api.ContainerAdjustment{}
	adjust.SetLinuxSeccompPolicy(policy)
	return adjust, nil, nil
}

func (p *Plugin) remember(id string, own validator.Own) {
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	p.lastOwn.id, p.lastOwn.own = id, own
}

// ownFor is what the plugin did to the container id; zero if it did not
// see that container created.
func (p *Plugin) ownFor(id string) validator.Own {
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	if p.lastOwn.id != id {
		return validator.Own{}
	}
	return p.lastOwn.own
}

func (p *Plugin) checkUserNamespace(id k8s.Identity, scope config.Scope, pod *api.PodSandbox, ctr *api.Container) error {
	mode := p.cfg.Mode(config.RuleUserNamespace, scope)
	if mode == config.Off {
		return nil
	}
	if err := userns.Check(p.cfg.UserNamespaces, scope, pod, ctr, p.host); err != nil {
		return p.judge(config.RuleUserNamespace, mode, "", id, err)
	}
	p.metrics.decided(config.RuleUserNamespace, outcomePass, "")
	return nil
}

// checkHostNamespaces judges the host namespaces the pod itself asks for
// (hostNetwork, hostPID, hostIPC). Host-network agents, CNI and storage
// plugins need them, so only a mode set for the pod's namespace or runtime
// handler refuses them: the rule's node-wide mode audits at most.
func (p *Plugin) checkHostNamespaces(id k8s.Identity, scope config.Scope, ctr *api.Container) error {
	mode, explicit := p.cfg.ExplicitMode(config.RuleHostNamespaces, scope)
	if !explicit {
		if mode = p.cfg.Mode(config.RuleHostNamespaces, scope); mode == config.Enforce {
			mode = config.Audit
		}
	}
	if mode == config.Off {
		return nil
	}
	var fields []string
	for _, h := range config.HostNamespaces {
		for _, s := range hostns.Of(ctr.GetLinux().GetNamespaces(), []string{h.Type}, p.host) {
			fields = append(fields, fmt.Sprintf("%s: true (%s namespace: %s)", h.Field, h.Type, s.Why))
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return p.judge(config.RuleHostNamespaces, mode, reasonPodHostNamespaces, id,
		fmt.Errorf("the pod shares the host's namespaces: %s", strings.Join(fields, ", ")))
}

// checkTolerateMissingPlugins refuses a pod that opts out of containerd's
// required-plugins validator (the suite's drop-in), which would let it
// start while this plugin is absent, where it may not: any pod can set an
// annotation, so only static pods (written by the node's administrator) and
// the namespaces where the rule is off (the suite's own DaemonSets') may.
func (p *Plugin) checkTolerateMissingPlugins(id k8s.Identity, scope config.Scope, pod *api.PodSandbox) error {
	mode := p.cfg.Mode(config.RuleTolerateMissingPlugins, scope)
	keys := k8s.TolerateMissingPluginsKeys(pod.GetAnnotations())
	if mode == config.Off || len(keys) == 0 || k8s.StaticPod(pod.GetAnnotations()) {
		return nil
	}
	slices.Sort(keys)
	return p.judge(config.RuleTolerateMissingPlugins, mode, "", id, fmt.Errorf(
		"annotation %s=%s would let the pod start without the security plugin (containerd's required-plugins validator): "+
			"it is allowed in static pods and where rules.%s is off only",
		quote.Bare(keys[0]), quote.Value(pod.GetAnnotations()[keys[0]]), config.RuleTolerateMissingPlugins))
}

// confine returns the seccomp policy to give the container (nil for none)
// and what the validator is to know of it.
func (p *Plugin) confine(id k8s.Identity, scope config.Scope, pod *api.PodSandbox, ctr *api.Container) (*api.LinuxSeccomp, validator.Own, error) {
	mode := p.cfg.Mode(config.RuleSeccomp, scope)
	if mode == config.Off {
		return nil, validator.Own{}, nil
	}
	isPrivileged := privileged.Of(ctr).Privileged()
	reason := ""
	if isPrivileged {
		reason = profile.ReasonPrivileged
	}
	choice, err := profile.Choose(p.cfg.Seccomp, scope, id, pod, ctr, isPrivileged)
	if err != nil {
		return nil, validator.Own{}, p.judge(config.RuleSeccomp, mode, reason, id, err)
	}
	log := p.log.WithFields(id.Fields()).WithFields(logrus.Fields{"rule": config.RuleSeccomp, "reason": choice.Reason})
	if !choice.Apply {
		outcome := outcomePass
		if choice.Exempt {
			outcome = outcomeExempt
			log.Info("left unconfined")
		}
		p.metrics.decided(config.RuleSeccomp, outcome, reason)
		return nil, validator.Own{LeftPrivileged: isPrivileged}, nil
	}
	name := profileName(choice.Profile)
	if !p.recentRuntime {
		if p.cfg.DefaultMode(config.RuleSeccomp, scope) {
			// Refusing every container the plugin cannot confine would
			// break every pod of a node whose operator asked for nothing:
			// fail closed only where the configuration says enforce.
			mode = config.Audit
		}
		return nil, validator.Own{}, p.judge(config.RuleSeccomp, mode, reason, id, fmt.Errorf(
			"%s: cannot apply seccomp profile %s: runtime %s drops NRI seccomp policies (containerd >= %s or CRI-O >= %s apply them)",
			choice.Reason, name, p.runtime, minRecentNRI["containerd"], minRecentNRI["cri-o"]))
	}
	policy, err := p.store.Build(seccomp.Request{Profile: choice.Profile, Complain: choice.Complain, Arch: p.arch,
		Capabilities: seccomp.DefaultCapabilities})
	if err != nil {
		if choice.Annotation != "" {
			err = fmt.Errorf("%w: %w", &k8s.AnnotationError{Key: choice.Annotation, Value: choice.Profile,
				Want: "a valid profile in " + p.cfg.Seccomp.ProfileDir}, err)
		}
		return nil, validator.Own{}, p.judge(config.RuleSeccomp, mode, reason, id, fmt.Errorf("building seccomp profile %s: %w", name, err))
	}
	log = log.WithFields(logrus.Fields{"profile": name, "complain": choice.Complain})
	if mode == config.Audit {
		p.metrics.decided(config.RuleSeccomp, outcomeAudited, reason)
		log.Info("audit: would apply the seccomp profile")
		return nil, validator.Own{}, nil
	}
	p.metrics.decided(config.RuleSeccomp, outcomeApplied, reason)
	log.Info("applied the seccomp profile")
	return policy, validator.Own{Seccomp: policy}, nil
}

func profileName(name string) string {
	if name == "" {
		return "runtime/default"
	}
	return name
}

// judge acts on a rule broken by the container being created: enforce
// refuses it with an error saying why, audit logs and lets it through;
// reason is the decision's metric label.
func (p *Plugin) judge(rule config.Rule, mode config.Mode, reason string, id k8s.Identity, problem error) error {
	log := p.log.WithFields(id.Fields()).WithField("rule", rule).WithError(problem)
	if mode == config.Audit {
		p.metrics.decided(rule, outcomeAudited, reason)
		log.Info("audit: would refuse the container")
		return nil
	}
	p.metrics.decided(rule, outcomeRefused, reason)
	log.Info("refused the container")
	return fmt.Errorf("security rule %s refused container %s: %w", rule, id, problem)
}

// ValidateContainerAdjustment judges what the other plugins did to the
// container; it refuses the container if an enforced rule found something.
func (p *Plugin) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	id := k8s.IdentityOf(req.GetPod(), req.GetContainer())
	scope := config.Scope{Namespace: id.Namespace, Pod: id.Pod, RuntimeHandler: req.GetPod().GetRuntimeHandler()}
	enabled := func(r config.Rule) bool { return p.cfg.Mode(r, scope) != config.Off }
	findings := p.validator.Check(req, enabled, p.ownFor(req.GetContainer().GetId()))

	broken := map[config.Rule]bool{}
	var refusals []string
	for _, f := range findings {
		broken[f.Rule] = true
		log := p.log.WithFields(id.Fields()).WithFields(logrus.Fields{
			"rule": f.Rule, "plugin": f.Plugin, "count": f.Count(), "items": strings.Join(f.Items, ", ")})
		if p.cfg.Mode(f.Rule, scope) == config.Audit {
			p.metrics.decided(f.Rule, outcomeAudited, "")
			log.Infof("audit: would refuse: %s", f.Problem)
			continue
		}
		p.metrics.decided(f.Rule, outcomeRefused, "")
		log.Infof("refused: %s", f.Problem)
		refusals = append(refusals, f.String())
	}
	for _, r := range config.ValidatorRules {
		if enabled(r) && !broken[r] {
			p.metrics.decided(r, outcomePass, "")
		}
	}
	if len(refusals) > 0 {
		return fmt.Errorf("security validator refused container %s: %s", id, strings.Join(refusals, "; "))
	}
	return nil
}
