package runtime

import (
	"context"
	"errors"
	"path/filepath"
)

// Helm runs the cache's helm CLI against the cluster (Options.Cluster) and
// returns its output. Its cache, configuration and data live in the run
// dir, so that nothing is written under the host's home.
func (s *Sandbox) Helm(ctx context.Context, args ...string) ([]byte, error) {
	if s.cluster == nil {
		return nil, errors.New("running helm: the sandbox is not a cluster (Options.Cluster)")
	}
	home := filepath.Join(s.dir, "helm")
	env := []string{
		"KUBECONFIG=" + s.cluster.kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
	}
	return runTool(ctx, env, append([]string{s.opts.Cache.Bin("helm")}, args...)...)
}

// Kubectl runs the cache's kubectl against the cluster as its admin and
// returns its output.
func (s *Sandbox) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	if s.cluster == nil {
		return nil, errors.New("running kubectl: the sandbox is not a cluster (Options.Cluster)")
	}
	return runTool(ctx, []string{"KUBECONFIG=" + s.cluster.kubeconfig}, append([]string{s.opts.Cache.Bin("kubectl")}, args...)...)
}
