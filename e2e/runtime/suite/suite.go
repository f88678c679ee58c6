// Package suite installs the nri-suite into a cluster sandbox the way a
// cluster gets it: the images `make images` writes, loaded by the sandbox's
// runtime, and the Helm chart with values that point it at the sandbox's
// paths. `make run` (e2e/runtime/cmd/nri-sandbox) and the cluster tests
// (e2e/runtime/deploy) install it through this one code path, so that what
// a person sees is what the tests checked. It sits beside the sandbox
// package rather than in it: the sandbox brings up nodes and clusters
// whatever runs on them, and is imported by every plugin's real-node tests,
// none of which need the chart.
package suite

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
	"github.com/nri-suite/nri-suite/internal/catalog"
)

// Release is the Helm release, and the namespace, the suite is installed as.
const Release = "nri-suite"

// ChartDir is the chart's directory in the repository.
const ChartDir = "deployments/helm/nri-suite"

// StatsTLSSecret is the stats listener's serving certificate (the chart's
// plugins.stats.tlsSecret), which Install issues with the cluster's CA for
// the node's address and loopback, so that metrics-server and the tests
// verify it as they verify the kubelet's.
const StatsTLSSecret = "nri-stats-tls"

// StatsPort is the stats listener's port (the chart's statsPort), on the
// node's address: metrics-server's --kubelet-port.
const StatsPort = 9191

// BuildImages runs `make images` of the repository at repoRoot into dir,
// with makeVars (such as IMAGE_TAG=...), and returns the archives it wrote.
// It builds for the host's platform only, the one its runtime runs, unless
// makeVars set IMAGE_PLATFORMS: another platform's static builds would only
// cost time.
func BuildImages(ctx context.Context, repoRoot, dir string, makeVars ...string) ([]sandbox.Image, error) {
	args := slices.Concat([]string{"-C", repoRoot, "images", "IMAGES_OUT=" + dir, "IMAGE_PLATFORMS=linux/" + runtime.GOARCH}, makeVars)
	cmd := exec.CommandContext(ctx, "make", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the images (make images): %w: %s", err, out)
	}
	return LoadImages(dir)
}

// LoadImages returns the plugin images (nri-*.tar) `make images` wrote
// into dir, under the references they name.
func LoadImages(dir string) ([]sandbox.Image, error) {
	archives, err := filepath.Glob(filepath.Join(dir, "nri-*.tar"))
	if err != nil {
		return nil, fmt.Errorf("listing the images in %s: %w", dir, err)
	}
	if len(archives) == 0 {
		return nil, fmt.Errorf("loading the images: no nri-*.tar in %s (run make images IMAGES_OUT=%s)", dir, dir)
	}
	images := make([]sandbox.Image, len(archives))
	for i, archive := range archives {
		if images[i], err = sandbox.ArchiveImage(archive); err != nil {
			return nil, err
		}
	}
	return images, nil
}

// paths are the sandbox's places for what the chart puts on the host.
type paths struct {
	// nriSocketDir holds the runtime's NRI socket.
	nriSocketDir string
	// cdiSpecDirs are the directories the runtime reads CDI specs from.
	cdiSpecDirs []string
	// helperDir is where sidecar-order's helper is copied to: the runtime
	// bind-mounts it into containers from there, so it is the same path on
	// the host and in the plugin's container.
	helperDir string
	// noPriorityClass leaves the chart's system-node-critical out, for
	// runtimes that cannot run such pods here (sandbox.CRIONodeCriticalSkip).
	noPriorityClass bool
}

// values are the chart values for a sandbox: its paths in place of the
// host's, the local images only (there is no registry), and security's
// validator allowing sidecar-order's mounts where they are.
func values(p paths, plugins []string) map[string]any {
	values := map[string]any{
		"image":       map[string]any{"pullPolicy": "Never"},
		"nri":         map[string]any{"socketDir": p.nriSocketDir},
		"cdiSpecDirs": p.cdiSpecDirs,
		"plugins": map[string]any{
			"sidecar-order": map[string]any{"helperDir": p.helperDir},
			"security": map[string]any{"config": map[string]any{"validator": map[string]any{
				"mounts": map[string]any{"plugins": map[string]any{
					// The chart's sharedDir stays the host's /run/nri-suite.
					catalog.SidecarOrder.ID(): []string{p.helperDir + "/nri-sidecar-helper", "/run/nri-suite/sidecar-order/*"},
				}},
			}}},
			// On the node's address, as metrics-server looks for a kubelet,
			// with a certificate of the cluster's CA.
			"stats": map[string]any{"hostNetwork": true, "tlsSecret": StatsTLSSecret},
		},
		// topology-aware publishes the node's NodeResourceTopology, with
		// the CRD (the node resource topology scenario).
		"nodeResourceTopology": map[string]any{"enabled": true},
	}
	// The sandbox's node has 2 CPUs: the plugins request none, so that a
	// pod may ask for all of them and topology-aware, not the kubelet's
	// accounting, decides what fits (the resize scenario's refusal).
	settings := values["plugins"].(map[string]any)
	for _, name := range plugins {
		plugin, _ := settings[name].(map[string]any)
		if plugin == nil {
			plugin = map[string]any{}
			settings[name] = plugin
		}
		plugin["resources"] = map[string]any{"requests": map[string]any{"cpu": "0"}}
	}
	if p.noPriorityClass {
		values["priorityClassName"] = ""
	}
	return values
}

// sandboxPaths are the paths of sb: the helper goes into its run dir, which
// the teardown removes after the containers that mount it are gone.
func sandboxPaths(sb *sandbox.Sandbox) paths {
	critical := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "system-node-critical",
		Containers: []corev1.Container{{Name: "c"}}}}
	return paths{
		nriSocketDir:    filepath.Dir(sb.NRI().Socket),
		cdiSpecDirs:     sb.CDISpecDirs(),
		helperDir:       filepath.Join(sb.Dir(), "sidecar-helper"),
		noPriorityClass: sb.CannotRun(critical) == sandbox.CRIONodeCriticalSkip,
	}
}

// Install installs the chart at chartDir into the cluster sandbox sb with
// the sandbox's values (written to values.yaml in its run dir) and returns
// every DaemonSet of the release once all are Ready.
func Install(ctx context.Context, sb *sandbox.Sandbox, chartDir string) ([]appsv1.DaemonSet, error) {
	data, err := yaml.Marshal(values(sandboxPaths(sb), catalog.Names()))
	if err != nil {
		return nil, fmt.Errorf("encoding the chart values: %w", err)
	}
	if err := createStatsTLSSecret(ctx, sb); err != nil {
		return nil, err
	}
	valuesFile := filepath.Join(sb.Dir(), "values.yaml")
	if err := os.WriteFile(valuesFile, data, 0o644); err != nil {
		return nil, fmt.Errorf("writing the chart values: %w", err)
	}
	if _, err := sb.Helm(ctx, "install", Release, chartDir, "--namespace", Release, "--create-namespace", "--values", valuesFile); err != nil {
		return nil, fmt.Errorf("installing the chart %s: %w", chartDir, err)
	}
	return waitDaemonSets(ctx, sb.Client(), Release)
}

// createStatsTLSSecret creates the release's namespace and StatsTLSSecret
// in it, unless they are there (a reinstall keeps them).
func createStatsTLSSecret(ctx context.Context, sb *sandbox.Sandbox) error {
	client := sb.Client()
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Release}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", Release, err)
	}
	ca, err := pki.LoadCA(sb.PKI().CACert, sb.PKI().CAKey)
	if err != nil {
		return fmt.Errorf("issuing the stats listener's certificate: %w", err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "nri-stats", DNSNames: []string{sb.NodeName()},
		IPs: []net.IP{sb.NodeIP(), net.IPv4(127, 0, 0, 1)}, Usage: pki.Server})
	if err != nil {
		return fmt.Errorf("issuing the stats listener's certificate: %w", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: StatsTLSSecret, Namespace: Release}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
	if _, err := client.CoreV1().Secrets(Release).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating secret %s/%s: %w", Release, StatsTLSSecret, err)
	}
	return nil
}

// waitDaemonSets waits until namespace has DaemonSets and every one is
// Ready (see daemonSetReady), and returns them. It waits itself rather
// than with helm's --wait, so that a timeout names the DaemonSets that are
// not Ready and why their pods are not.
func waitDaemonSets(ctx context.Context, client kubernetes.Interface, namespace string) ([]appsv1.DaemonSet, error) {
	var ready []appsv1.DaemonSet
	err := sandbox.PollUntil(ctx, 3*time.Minute, 500*time.Millisecond, func() error {
		list, err := client.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no DaemonSet in namespace %s", namespace)
		}
		var notReady []string
		for _, ds := range list.Items {
			if why := daemonSetReady(&ds); why != "" {
				notReady = append(notReady, why+podProblems(ctx, client, &ds))
			}
		}
		if len(notReady) > 0 {
			return errors.New(strings.Join(notReady, "; "))
		}
		ready = list.Items
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the DaemonSets in namespace %s to be Ready: %w", namespace, err)
	}
	return ready, nil
}

// daemonSetReady says why ds is not Ready ("" when it is): its controller
// has seen its latest spec and every node it schedules to runs an updated,
// ready pod.
func daemonSetReady(ds *appsv1.DaemonSet) string {
	st := ds.Status
	switch {
	case st.ObservedGeneration < ds.Generation:
		return fmt.Sprintf("DaemonSet %s: generation %d not observed yet", ds.Name, ds.Generation)
	case st.DesiredNumberScheduled == 0:
		return fmt.Sprintf("DaemonSet %s: scheduled to no node", ds.Name)
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberReady < st.DesiredNumberScheduled:
		return fmt.Sprintf("DaemonSet %s: %d of %d pods updated, %d ready", ds.Name,
			st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberReady)
	}
	return ""
}

// podProblems lists what keeps the pods of ds from being ready, as
// ", pod NAME: ..." for a message about ds; nothing when they cannot be
// listed (the message says enough without).
func podProblems(ctx context.Context, client kubernetes.Interface, ds *appsv1.DaemonSet) string {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return ""
	}
	pods, err := client.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return ""
	}
	var out string
	for _, pod := range pods.Items {
		if why := sandbox.PodNotReady(&pod); why != "" {
			out += fmt.Sprintf(", pod %s: %s", pod.Name, why)
		}
	}
	return out
}
