package endpointauth

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"

	"github.com/nri-suite/nri-suite/common/fsread"
	"github.com/nri-suite/nri-suite/common/incluster"
)

// The kubelet's defaults (KubeletConfiguration): an accepted token is
// trusted for 2 minutes, an authorization for 5 minutes, a refusal for 30 s.
const (
	TokenCacheTTL     = 2 * time.Minute
	AllowedCacheTTL   = 5 * time.Minute
	DeniedCacheTTL    = 30 * time.Second
	maxFileSize       = 1 << 20
	maxStaticTokenLen = 64 << 10
)

// webhookBackoff is k8s.io/apiserver's DefaultAuthWebhookRetryBackoff, which
// the kubelet uses (its package would bring the whole generic API server).
var webhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// Cluster is what AuthWebhook needs besides the options: the API server
// that reviews tokens and requests, and the node the requests are about.
type Cluster struct {
	// Client reaches the API server; nil: one is made from Kubeconfig, or
	// from the pod's service account when Kubeconfig is empty.
	Client     kubernetes.Interface
	Kubeconfig string
	// NodeName is the node whose nodes/metrics, nodes/stats or nodes/proxy
	// a request needs.
	NodeName string
}

// Metrics count the refused requests of every listener of a plugin.
type Metrics struct{ denied *prometheus.CounterVec }

// NewMetrics returns the counter <namespace>_http_requests_denied_total.
func NewMetrics(namespace string) *Metrics {
	return &Metrics{denied: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "http_requests_denied_total",
		Help: "Requests to the plugin's protected HTTP endpoints that were refused, by listener and code: 401 (no or bad credentials), " +
			"403 (not authorized), 500 (the authorization could not be decided).",
	}, []string{"listener", "code"})}
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector { return []prometheus.Collector{m.denied} }

// Guard is one listener's protection, its files loaded.
type Guard struct {
	opts    Options
	log     *logrus.Entry
	metrics *Metrics
	// serving makes the TLS configuration from the current files; nil
	// for plain HTTP.
	serving *dynamiccertificates.DynamicServingCertificateController
	// reloaders watch the files until the context ends.
	reloaders []dynamiccertificates.ControllerRunner
	// authn is nil when requests need no authentication; authz nil when
	// an authenticated request is allowed.
	authn authenticator.Request
	authz authorizer.Authorizer
	node  string
}

// New loads the files o names and builds the checks; an error names the
// flag and the file. o must have passed Check. c is used with AuthWebhook
// only.
func New(o Options, c Cluster, m *Metrics, log *logrus.Entry) (*Guard, error) {
	g := &Guard{opts: o, log: log.WithField("listener", o.Listener), metrics: m, node: c.NodeName}
	var clientCA *dynamiccertificates.DynamicFileCAContent
	if o.ClientCA != "" {
		if err := checkFile(o.flag("client-ca", true), o.ClientCA); err != nil {
			return nil, err
		}
		var err error
		if clientCA, err = dynamiccertificates.NewDynamicCAContentFromFile(o.Listener+"-client-ca", o.ClientCA); err != nil {
			return nil, fmt.Errorf("loading %s %s: %w", o.flag("client-ca", true), o.ClientCA, err)
		}
		g.reloaders = append(g.reloaders, clientCA)
	}
	if err := g.loadServing(clientCA); err != nil {
		return nil, err
	}
	var client kubernetes.Interface
	if o.Auth == AuthWebhook {
		if c.NodeName == "" {
			return nil, fmt.Errorf("%s=%s: the node's name is empty, expected --node-name (the chart sets it from spec.nodeName): "+
				"the SubjectAccessReview asks for this node's subresources", o.flag("auth", true), AuthWebhook)
		}
		var err error
		if client, err = apiClient(c); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", o.flag("auth", true), AuthWebhook, err)
		}
		if g.authz, err = (authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: client.AuthorizationV1(),
			AllowCacheTTL:             AllowedCacheTTL,
			DenyCacheTTL:              DeniedCacheTTL,
			WebhookRetryBackoff:       &webhookBackoff,
		}).New(); err != nil {
			return nil, fmt.Errorf("%s=%s: SubjectAccessReview: %w", o.flag("auth", true), AuthWebhook, err)
		}
	}
	var authns []authenticator.Request
	if clientCA != nil || client != nil {
		config := authenticatorfactory.DelegatingAuthenticatorConfig{
			Anonymous:           &apiserver.AnonymousAuthConfig{Enabled: false},
			CacheTTL:            TokenCacheTTL,
			WebhookRetryBackoff: &webhookBackoff,
		}
		if clientCA != nil {
			config.ClientCertificateCAContentProvider = clientCA
		}
		if client != nil {
			config.TokenAccessReviewClient = client.AuthenticationV1()
		}
		authn, _, err := config.New()
		if err != nil {
			return nil, fmt.Errorf("%s: authentication: %w", o.Listener, err)
		}
		authns = append(authns, authn)
	}
	if o.TokenFile != "" {
		token, err := loadStaticToken(o.flag("token-file", true), o.TokenFile)
		if err != nil {
			return nil, err
		}
		authns = append(authns, bearertoken.New(token))
	}
	if len(authns) > 0 {
		g.authn = union.New(authns...)
	}
	return g, nil
}

// loadServing loads the serving certificate (a self-signed one for
// AuthWebhook without files) and the client CA into the controller that
// hands each TLS handshake the current configuration.
func (g *Guard) loadServing(clientCA *dynamiccertificates.DynamicFileCAContent) error {
	o := g.opts
	if !o.TLS() {
		return nil
	}
	var serving dynamiccertificates.CertKeyContentProvider
	if o.TLSCert != "" {
		for flag, path := range map[string]string{o.flag("tls-cert", true): o.TLSCert, o.flag("tls-key", true): o.TLSKey} {
			if err := checkFile(flag, path); err != nil {
				return err
			}
		}
		files, err := dynamiccertificates.NewDynamicServingContentFromFiles(o.Listener+"-serving", o.TLSCert, o.TLSKey)
		if err != nil {
			return fmt.Errorf("loading %s %s and %s %s: %w", o.flag("tls-cert", true), o.TLSCert, o.flag("tls-key", true), o.TLSKey, err)
		}
		g.reloaders = append(g.reloaders, files)
		serving = files
	} else {
		certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(g.node, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: making a self-signed serving certificate: %w", o.Listener, err)
		}
		if serving, err = dynamiccertificates.NewStaticCertKeyContent(o.Listener+"-self-signed", certPEM, keyPEM); err != nil {
			return fmt.Errorf("%s: self-signed serving certificate: %w", o.Listener, err)
		}
		g.log.Warnf("no %s: serving HTTPS with a self-signed certificate made at start; clients cannot verify it", o.flag("tls-cert", true))
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	var ca dynamiccertificates.CAContentProvider
	if clientCA != nil {
		// Asked for, and verified by the x509 authenticator: a certificate
		// of another CA is a 401 that is counted, not a failed handshake.
		base.ClientAuth = tls.RequestClientCert
		ca = clientCA
	}
	g.serving = dynamiccertificates.NewDynamicServingCertificateController(base, ca, serving, nil, nil)
	for _, r := range g.reloaders {
		if n, ok := r.(dynamiccertificates.Notifier); ok {
			n.AddListener(g.serving)
		}
	}
	if err := g.serving.RunOnce(); err != nil {
		return fmt.Errorf("%s: TLS configuration: %w", o.Listener, err)
	}
	return nil
}

// checkFile reads path once through fsread, so that a FIFO or a huge file
// is an error naming the flag rather than a start that hangs (the reloads
// read it with os.ReadFile).
func checkFile(flag, path string) error {
	if _, err := fsread.File(path, maxFileSize); err != nil {
		return fmt.Errorf("loading %s: %w", flag, err)
	}
	return nil
}

// apiClient is c.Client, or a client from c.Kubeconfig or the pod's
// service account.
func apiClient(c Cluster) (kubernetes.Interface, error) {
	if c.Client != nil {
		return c.Client, nil
	}
	return incluster.ClientFor(c.Kubeconfig)
}

// TLSConfig is the listener's TLS configuration, nil for plain HTTP. Every
// handshake gets the certificates last loaded.
func (g *Guard) TLSConfig() *tls.Config {
	if g.serving == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: g.serving.GetConfigForClient}
}

// Run reloads the certificate, key and CA files when they change (watched,
// and read again every minute) until ctx ends.
func (g *Guard) Run(ctx context.Context) {
	for _, r := range g.reloaders {
		go r.Run(ctx, 1)
	}
	if g.serving != nil {
		go g.serving.Run(1, ctx.Done())
	}
}

// Protect wraps h with the checks; the public paths are served to anyone
// (a health check that says nothing about the node).
func (g *Guard) Protect(h http.Handler, public ...string) http.Handler {
	if g.authn == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(public, r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		resp, ok, err := g.authn.AuthenticateRequest(r)
		if err != nil || !ok {
			g.deny(w, r, http.StatusUnauthorized, "Unauthorized", logrus.Fields{"error": err})
			return
		}
		if g.authz == nil {
			h.ServeHTTP(w, r)
			return
		}
		attrs := nodeAttributes(g.node, resp.User, r)
		var subresources []string
		for _, attr := range attrs {
			subresources = append(subresources, attr.GetSubresource())
			decision, _, err := g.authz.Authorize(r.Context(), attr)
			if err != nil {
				g.deny(w, r, http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
					resp.User.GetName(), attr.GetVerb(), attr.GetResource(), attr.GetSubresource()), logrus.Fields{"error": err})
				return
			}
			if decision == authorizer.DecisionAllow {
				h.ServeHTTP(w, r)
				return
			}
		}
		g.deny(w, r, http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)",
			resp.User.GetName(), attrs[0].GetVerb(), attrs[0].GetResource(), subresources), logrus.Fields{"user": resp.User.GetName()})
	})
}

// deny answers code with msg, as the kubelet does, and counts it.
func (g *Guard) deny(w http.ResponseWriter, r *http.Request, code int, msg string, fields logrus.Fields) {
	g.metrics.denied.WithLabelValues(g.opts.Listener, strconv.Itoa(code)).Inc()
	g.log.WithFields(fields).WithFields(logrus.Fields{"path": r.URL.Path, "remote": r.RemoteAddr, "code": code}).Debug(msg)
	http.Error(w, msg, code)
}

// staticToken authenticates the one token of a file.
type staticToken struct {
	token []byte
	user  user.Info
}

// loadStaticToken reads the token file.
func loadStaticToken(flag, path string) (*staticToken, error) {
	raw, err := fsread.File(path, maxStaticTokenLen)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", flag, err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return nil, fmt.Errorf("%s %s is empty, expected a token", flag, path)
	}
	return &staticToken{token: []byte(token), user: &user.DefaultInfo{Name: "token-file:" + path}}, nil
}

var errWrongToken = errors.New("not the token of the token file")

// AuthenticateToken implements authenticator.Token.
func (s *staticToken) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	if subtle.ConstantTimeCompare([]byte(token), s.token) != 1 {
		return nil, false, errWrongToken
	}
	return &authenticator.Response{User: s.user}, true, nil
}
