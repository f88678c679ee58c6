package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/nri-suite/nri-suite/common/plugin"
	"github.com/nri-suite/nri-suite/e2e/testplugin/syncreport"
)

// config is the plugin's YAML configuration.
type config struct {
	// Env is added to every created container; absent means {NRI_SUITE_E2E: <name>}.
	Env map[string]string `yaml:"env"`
	// SyncReport, if set, is the file the Synchronize report is written to.
	SyncReport string `yaml:"syncReport"`
	// Weaken weakens the containers of chosen pods, to test validators.
	Weaken weaken `yaml:"weaken"`
	// Record, if set, is an existing directory where the NRI view of every
	// container being created is written (record.go).
	Record string `yaml:"record"`
}

type testPlugin struct {
	name string

	mu     sync.Mutex
	cfg    config
	report syncreport.Report
	live   liveSet
}

func newTestPlugin(d plugin.Deps) (any, error) {
	p := &testPlugin{name: d.Name, report: syncreport.Report{Containers: []syncreport.Container{}}, live: liveSet{}}
	p.cfg.Env = p.defaultEnv()
	return p, nil
}

// defaultEnv names the plugin, so a test can tell which instance touched a container.
func (p *testPlugin) defaultEnv() map[string]string {
	return map[string]string{"NRI_SUITE_E2E": p.name}
}

// Configure implements plugin.Configurable.
func (p *testPlugin) Configure(data []byte, source string) error {
	var cfg config
	if err := plugin.DecodeConfig(data, source, &cfg); err != nil {
		return err
	}
	for key := range cfg.Env {
		if err := checkEnvKey(key); err != nil {
			return fmt.Errorf("config %s: env %w", source, err)
		}
	}
	if err := cfg.Weaken.check(source); err != nil {
		return err
	}
	if cfg.Record != "" {
		if info, err := os.Stat(cfg.Record); err != nil || !info.IsDir() || !filepath.IsAbs(cfg.Record) {
			return fmt.Errorf("config %s: record: %q: expected the absolute path of an existing directory", source, cfg.Record)
		}
	}
	if cfg.Env == nil {
		cfg.Env = p.defaultEnv()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg = cfg
	return nil
}

func checkEnvKey(key string) error {
	if key == "" || strings.ContainsAny(key, "=\x00") {
		return fmt.Errorf("key %q: expected a non-empty name without '=' or NUL", key)
	}
	return nil
}

// CreateContainer adds the configured environment, in key order, and the
// configured weakening changes, and updates the other containers if the pod
// asks for a fan-out.
func (p *testPlugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.Record != "" {
		if err := recordContainer(p.cfg.Record, pod, ctr); err != nil {
			return nil, nil, err
		}
	}
	adjust := &api.ContainerAdjustment{}
	for _, key := range slices.Sorted(maps.Keys(p.cfg.Env)) {
		adjust.AddEnv(key, p.cfg.Env[key])
	}
	p.cfg.Weaken.apply(pod, adjust)
	updates := p.live.fanout(pod, ctr)
	p.live[ctr.GetId()] = struct{}{}
	return adjust, updates, nil
}

// RemoveContainer forgets the container.
func (p *testPlugin) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, ctr.GetId())
	return nil
}

// Synchronize records what the runtime delivered and writes the report.
func (p *testPlugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	podByID := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		podByID[pod.GetId()] = pod
	}
	containers := make([]syncreport.Container, 0, len(ctrs))
	for _, c := range ctrs {
		pod := podByID[c.GetPodSandboxId()]
		containers = append(containers, syncreport.Container{
			ID:        c.GetId(),
			Pod:       pod.GetName(),
			Namespace: pod.GetNamespace(),
			Container: c.GetName(),
			State:     c.GetState().String(),
		})
	}
	slices.SortFunc(containers, func(a, b syncreport.Container) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod),
			cmp.Compare(a.Container, b.Container), cmp.Compare(a.ID, b.ID))
	})

	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = liveSet{}
	for _, c := range ctrs {
		p.live[c.GetId()] = struct{}{}
	}
	p.report.Synchronizations++
	p.report.Containers = containers
	return nil, p.writeReport()
}

// Close writes the report a last time, marked closed: the state flushed at a clean stop.
func (p *testPlugin) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.report.Closed = true
	return p.writeReport()
}

// writeReport writes the report if the configuration asks for one.
func (p *testPlugin) writeReport() error {
	if p.cfg.SyncReport == "" {
		return nil
	}
	return syncreport.Write(p.cfg.SyncReport, p.report)
}
