package deploy_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sandbox "github.com/nri-suite/nri-suite/e2e/runtime"
	"github.com/nri-suite/nri-suite/e2e/runtime/pki"
	"github.com/nri-suite/nri-suite/e2e/runtime/suite"
	"github.com/nri-suite/nri-suite/internal/catalog"
)

// metricsServer: metrics-server v0.8.0 reads nri-stats in the kubelet's
// place (its --kubelet-port is nri-stats' port on the node's address,
// where the sandbox's values put the listener, with a certificate of the
// cluster's CA), authenticating with its service account's token, which
// nri-stats has the API server review. `kubectl top` then shows nri-stats'
// figures, and they are the kubelet's own: a container's CPU within 5% of
// the rate of the kubelet's /metrics/resource over the same window, its
// working set exactly. Then the scrapes a Prometheus would make: with a
// service account's token and RBAC they succeed, and every bad credential
// gets 401 or 403, with no data, counted by nri-stats.
func metricsServer(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	require.NoError(t, sb.StartMetricsServer(ctx, sandbox.MetricsServerOptions{KubeletPort: suite.StatsPort, KubeletCAFile: sb.PKI().CACert}))
	pod := topPod()
	writePod(ctx, t, sb, pod)
	kubelet := watchKubelet(ctx, t, sb, pod.Name)

	// While metrics-server scrapes twice, the bad credentials.
	t.Run("scrapes", func(t *testing.T) { scrapes(ctx, t, sb) })

	t.Run("kubectl top", func(t *testing.T) {
		var usage podMetrics
		require.NoError(t, sandbox.PollUntil(ctx, time.Minute, time.Second, func() error {
			var err error
			usage, err = metricsOf(ctx, sb, pod)
			return err
		}), "metrics-server reports the pod")
		out, err := sb.Kubectl(ctx, "top", "pod", pod.Name, "--namespace", pod.Namespace, "--containers")
		require.NoError(t, err)
		t.Logf("kubectl top pod:\n%s", out)
		for _, c := range []string{"burn", "hold"} {
			assert.Regexp(t, fmt.Sprintf(`(?m)^%s\s+%s\s+\d+m\s+\d+Mi\s*$`, pod.Name, c), string(out))
		}
		out, err = sb.Kubectl(ctx, "top", "node")
		require.NoError(t, err)
		t.Logf("kubectl top node:\n%s", out)
		assert.Regexp(t, fmt.Sprintf(`(?m)^%s\s+\d+m\s+\d+%%\s+\d+Mi\s+\d+%%\s*$`, sb.NodeName()), string(out))

		// The burner's CPU against the kubelet's rate over metrics-server's
		// window: the kubelet's samples on both sides of it, interpolated.
		burn := usage.container("burn")
		start, end := usage.Timestamp.Add(-usage.Window.Duration), usage.Timestamp.Time
		rate, err := kubelet.rate("burn", start, end, time.Minute)
		require.NoError(t, err)
		got := burn.CPU.AsApproximateFloat64()
		t.Logf("burner over %s..%s: metrics-server (nri-stats) %.3f CPUs, kubelet %.3f CPUs", start.Format(time.TimeOnly),
			end.Format(time.TimeOnly), got, rate)
		assert.InDelta(t, rate, got, 0.05*rate, "the burner's CPU within 5%% of the kubelet's")
		assert.Greater(t, got, 0.05, "the burner burns (limited to 0.2 CPU)")

		// The working sets: exactly the kubelet's, once the kubelet's
		// figure held still around metrics-server's.
		for _, c := range []string{"burn", "hold"} {
			require.NoError(t, sandbox.PollUntil(ctx, time.Minute, time.Second, func() error {
				before := kubelet.latest(c)
				usage, err := metricsOf(ctx, sb, pod)
				if err != nil {
					return err
				}
				after, err := kubelet.next(ctx, c, before.at, time.Minute)
				if err != nil {
					return err
				}
				if before.workingSet != after.workingSet {
					return fmt.Errorf("container %s: the kubelet's working set moved (%d, then %d)", c, before.workingSet, after.workingSet)
				}
				memory := usage.container(c).Memory
				assert.Equal(t, before.workingSet, memory.Value(), "container %s's working set: the kubelet's", c)
				return nil
			}))
		}
		held := usage.container("hold").Memory
		assert.Greater(t, held.Value(), int64(32<<20), "the 32 MiB the holder keeps")
	})
}

// topPod burns half a CPU in one container and holds 32 MiB in the other.
func topPod() *corev1.Pod {
	pod := sandbox.BusyboxPod("metrics-top", "burn", "hold")
	pod.Spec.Containers[0].Command = []string{"sh", "-c", "trap 'exit 0' TERM; while :; do :; done"}
	// A quota the burner gets even on a busy machine (make test runs the
	// unit tests beside): at 500m it got 0.37-0.40 CPU there, a rate that
	// varied within the kubelet's 10-15 s between samples, so that the
	// kubelet's rate interpolated over metrics-server's window was 7% off
	// the window's own. Held at its quota, the rate is steady.
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}
	pod.Spec.Containers[1].Command = []string{"sh", "-c",
		"dd if=/dev/zero of=/dev/shm/hold bs=1M count=32 2>/dev/null; trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"}
	return pod
}

// podMetrics is the part of metrics.k8s.io/v1beta1's PodMetrics the test
// reads.
type podMetrics struct {
	Timestamp  metav1.Time     `json:"timestamp"`
	Window     metav1.Duration `json:"window"`
	Containers []struct {
		Name  string `json:"name"`
		Usage struct {
			CPU    resource.Quantity `json:"cpu"`
			Memory resource.Quantity `json:"memory"`
		} `json:"usage"`
	} `json:"containers"`
}

type containerUsage struct{ CPU, Memory resource.Quantity }

func (m podMetrics) container(name string) containerUsage {
	for _, c := range m.Containers {
		if c.Name == name {
			return containerUsage{CPU: c.Usage.CPU, Memory: c.Usage.Memory}
		}
	}
	return containerUsage{}
}

// metricsOf asks the metrics API (as kubectl top does) for pod's usage,
// with both its containers.
func metricsOf(ctx context.Context, sb *sandbox.Sandbox, pod *corev1.Pod) (podMetrics, error) {
	var m podMetrics
	body, err := sb.Client().CoreV1().RESTClient().Get().
		AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", pod.Namespace, "pods", pod.Name).DoRaw(ctx)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("decoding the PodMetrics of %s: %w", pod.Name, err)
	}
	if len(m.Containers) != len(pod.Spec.Containers) {
		return m, fmt.Errorf("PodMetrics of %s has %d containers, want %d", pod.Name, len(m.Containers), len(pod.Spec.Containers))
	}
	return m, nil
}

// kubeletSample is one container's figures in the kubelet's
// /metrics/resource, at the time the kubelet stamped them.
type kubeletSample struct {
	at         time.Time
	cpuSeconds float64
	workingSet int64
}

// kubeletWatch keeps the kubelet's samples of a pod's containers, read
// every second: the kubelet's cAdvisor refreshes them every 10 to 15 s.
type kubeletWatch struct {
	mu      sync.Mutex
	samples map[string][]kubeletSample // by container, oldest first
}

func watchKubelet(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, pod string) *kubeletWatch {
	w := &kubeletWatch{samples: map[string][]kubeletSample{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if body, err := sb.KubeletGet(ctx, "/metrics/resource"); err == nil {
				w.add(pod, body)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

// add records the samples of body newer than the last ones.
func (w *kubeletWatch) add(pod string, body []byte) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return
	}
	byContainer := map[string]kubeletSample{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pod"] != pod || labels["container"] == "" {
				continue
			}
			s := byContainer[labels["container"]]
			s.at = time.UnixMilli(m.GetTimestampMs())
			switch name {
			case "container_cpu_usage_seconds_total":
				s.cpuSeconds = m.GetCounter().GetValue()
			case "container_memory_working_set_bytes":
				s.workingSet = int64(m.GetGauge().GetValue())
			}
			byContainer[labels["container"]] = s
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, s := range byContainer {
		if n := len(w.samples[c]); n == 0 || s.at.After(w.samples[c][n-1].at) {
			w.samples[c] = append(w.samples[c], s)
		}
	}
}

func (w *kubeletWatch) latest(container string) kubeletSample {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.samples[container]; len(s) > 0 {
		return s[len(s)-1]
	}
	return kubeletSample{}
}

// next waits, up to timeout, for the kubelet's first sample after after.
func (w *kubeletWatch) next(ctx context.Context, container string, after time.Time, timeout time.Duration) (kubeletSample, error) {
	var found kubeletSample
	err := sandbox.PollUntil(ctx, timeout, 500*time.Millisecond, func() error {
		if s := w.latest(container); s.at.After(after) {
			found = s
			return nil
		}
		return fmt.Errorf("no sample of container %s after %s from the kubelet", container, after.Format(time.TimeOnly))
	})
	return found, err
}

// rate is the container's CPUs from start to end by the kubelet's counter,
// interpolated between its samples around each end; it waits up to
// timeout for a sample after end.
func (w *kubeletWatch) rate(container string, start, end time.Time, timeout time.Duration) (float64, error) {
	if _, err := w.next(context.Background(), container, end, timeout); err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	at := func(tm time.Time) (float64, error) {
		s := w.samples[container]
		for i := 1; i < len(s); i++ {
			if !s[i-1].at.After(tm) && !s[i].at.Before(tm) {
				f := float64(tm.Sub(s[i-1].at)) / float64(s[i].at.Sub(s[i-1].at))
				return s[i-1].cpuSeconds + f*(s[i].cpuSeconds-s[i-1].cpuSeconds), nil
			}
		}
		return 0, fmt.Errorf("no samples of container %s around %s from the kubelet", container, tm.Format(time.TimeOnly))
	}
	a, err := at(start)
	if err != nil {
		return 0, err
	}
	b, err := at(end)
	if err != nil {
		return 0, err
	}
	return (b - a) / end.Sub(start).Seconds(), nil
}

// scrapes: the stats listener as Prometheus scrapes it, with a service
// account's token whose RBAC allows nodes/metrics and nodes/stats; and
// each bad credential, refused with no data and counted.
func scrapes(ctx context.Context, t *testing.T, sb *sandbox.Sandbox) {
	client := sb.Client()
	const namespace = "default"
	reader := serviceAccount(ctx, t, sb, namespace, "stats-reader")
	serviceAccount(ctx, t, sb, namespace, "no-rbac")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nri-suite-test:stats-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/metrics", "nodes/stats"}, Verbs: []string{"get"}}}}
	_, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: reader.Name, Namespace: namespace}}}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		assert.NoError(t, client.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}))
		assert.NoError(t, client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{}))
	})

	saKey := serviceAccountKey(t, sb)
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	otherCA, err := pki.NewCA("another CA")
	require.NoError(t, err)
	stranger := clientCertificate(t, otherCA, "system:admin")

	caPEM, err := os.ReadFile(sb.PKI().CACert)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	verified := sb.NodeClient(&tls.Config{RootCAs: roots})
	base := "https://" + net.JoinHostPort(sb.NodeIP().String(), strconv.Itoa(suite.StatsPort))

	ok := func(path, token string) string {
		t.Helper()
		code, body := fetch(ctx, t, verified, base+path, token)
		require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		return body
	}
	// The grant takes effect as RBAC's cache catches up.
	require.NoError(t, poll(ctx, func() error {
		if code, body := fetch(ctx, t, verified, base+"/metrics/cadvisor", token(ctx, t, sb, reader)); code != http.StatusOK {
			return fmt.Errorf("%d: %s", code, body)
		}
		return nil
	}))
	cadvisor := ok("/metrics/cadvisor", token(ctx, t, sb, reader))
	assert.Contains(t, cadvisor, "container_cpu_usage_seconds_total{")
	// The node's disks from the pod (the host's mountinfo through the
	// host's PID namespace); their usage only with hostFilesystems.
	assert.Regexp(t, `container_fs_sector_reads_total\{container="",device="/dev/[^"]+",id="/"`, cadvisor)
	assert.NotContains(t, cadvisor, "container_fs_usage_bytes{", "the chart's default mounts no host root")
	assert.Contains(t, ok("/stats/pods", token(ctx, t, sb, reader)), `"pods"`)
	assert.Contains(t, ok("/metrics", forgeToken(t, saKey, reader, time.Hour)), "nri_suite_stats_containers",
		"a token signed with the cluster's key, as the API server signs them, is accepted")

	denied := func(code string) float64 {
		v, err := statsDenied(ctx, sb, code)
		require.NoError(t, err)
		return v
	}
	before401, before403 := denied("401"), denied("403")
	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		token  string
		want   int
	}{
		{"no token", verified, "/metrics/cadvisor", "", http.StatusUnauthorized},
		{"a wrong token", verified, "/metrics/cadvisor", "not-a-token", http.StatusUnauthorized},
		{"an expired service-account token", verified, "/metrics/cadvisor", forgeToken(t, saKey, reader, -time.Hour), http.StatusUnauthorized},
		{"a token signed by another key", verified, "/metrics/cadvisor", forgeToken(t, otherKey, reader, time.Hour), http.StatusUnauthorized},
		{"a token in the query string", verified, "/metrics/cadvisor?access_token=" + token(ctx, t, sb, reader), "", http.StatusUnauthorized},
		{"a client certificate of another CA", sb.NodeClient(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{stranger}}),
			"/metrics/cadvisor", "", http.StatusUnauthorized},
		{"a valid token without RBAC", verified, "/stats/pods", token(ctx, t, sb, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: "no-rbac", Namespace: namespace}}), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := fetch(ctx, t, tc.client, base+tc.path, tc.token)
			assert.Equal(t, tc.want, code, body)
			assert.NotContains(t, body, "container_", "no data")
			assert.NotContains(t, body, `"pods"`, "no data")
		})
	}
	assert.Equal(t, before401+6, denied("401"), "every 401 counted")
	assert.Equal(t, before403+1, denied("403"), "the 403 counted")
}

// statsDenied reads nri_suite_stats_http_requests_denied_total of code on
// the stats plugin's runner port (the node's loopback: the sandbox's
// values put stats on the node's network).
func statsDenied(ctx context.Context, sb *sandbox.Sandbox, code string) (float64, error) {
	body, err := sb.NodeGet(ctx, "http://"+catalog.Stats.LoopbackAddr()+"/metrics")
	if err != nil {
		return 0, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	for _, m := range families["nri_suite_stats_http_requests_denied_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["listener"] == "stats" && labels["code"] == code {
			return m.GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}

// fetch GETs url with token as a bearer token unless it is empty.
func fetch(ctx context.Context, t *testing.T, client *http.Client, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// serviceAccount creates a service account, removed when t ends.
func serviceAccount(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, namespace, name string) *corev1.ServiceAccount {
	t.Helper()
	sa, err := sb.Client().CoreV1().ServiceAccounts(namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, sb.Client().CoreV1().ServiceAccounts(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}))
	})
	return sa
}

// token is a token of sa from the TokenRequest API, as a pod gets one.
func token(ctx context.Context, t *testing.T, sb *sandbox.Sandbox, sa *corev1.ServiceAccount) string {
	t.Helper()
	tr, err := sb.Client().CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// serviceAccountKey is the key the cluster's API server signs
// service-account tokens with.
func serviceAccountKey(t *testing.T, sb *sandbox.Sandbox) *rsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile(sb.PKI().ServiceAccountKey)
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	return key.(*rsa.PrivateKey)
}

// forgeToken signs, with key, a bound service-account token of sa as the
// API server makes them (RS256, its issuer and audience, the
// kubernetes.io claims naming the account), valid until now+valid (in the
// past when valid is negative): with the cluster's key and a future expiry
// the API server accepts it, so an expired one is refused for its expiry
// alone.
func forgeToken(t *testing.T, key *rsa.PrivateKey, sa *corev1.ServiceAccount, valid time.Duration) string {
	t.Helper()
	const issuer = "https://kubernetes.default.svc.cluster.local"
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	kid := sha256.Sum256(pub)
	now := time.Now()
	issued := now.Add(valid).Add(-2 * time.Hour)
	if valid > 0 {
		issued = now.Add(-time.Minute)
	}
	header := map[string]string{"alg": "RS256", "kid": base64.RawURLEncoding.EncodeToString(kid[:])}
	claims := map[string]any{
		"iss": issuer, "aud": []string{issuer}, "sub": "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		"iat": issued.Unix(), "nbf": issued.Unix(), "exp": now.Add(valid).Unix(),
		"kubernetes.io": map[string]any{"namespace": sa.Namespace, "serviceaccount": map[string]string{"name": sa.Name, "uid": string(sa.UID)}},
	}
	enc := func(v any) string {
		data, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(data)
	}
	signed := enc(header) + "." + enc(claims)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	require.NoError(t, err)
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// clientCertificate is a client certificate of user issued by ca.
func clientCertificate(t *testing.T, ca *pki.CA, user string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: user, Organizations: []string{"system:masters"}, Usage: pki.Client})
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return cert
}
