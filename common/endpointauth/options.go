// Package endpointauth protects a plugin's HTTP endpoints the way the
// kubelet protects its own port: HTTPS with a serving certificate that is
// reloaded when its files change, every request authenticated (a client
// certificate of a CA, or a bearer token that the API server's TokenReview
// accepts) and authorized (a SubjectAccessReview on the node's
// nodes/metrics, nodes/stats or nodes/proxy, from the request's path as the
// kubelet maps it). The checks are k8s.io/apiserver's, with their caches,
// built as the kubelet builds them (cmd/kubelet/app/auth.go); the
// certificates are its dynamiccertificates. Refusals are 401 or 403 and are
// counted.
//
// For installs without an API server a static bearer token (a file) and
// client certificates alone still work. Plain HTTP without authentication
// is allowed on loopback only: anything else is refused at start.
package endpointauth

import (
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"
)

// Authorization modes, the values of --<listener>-auth.
const (
	// AuthNone: no authorization; authentication by a client certificate
	// (ClientCA) or a static token (TokenFile), if either is set.
	AuthNone = "none"
	// AuthWebhook: as the kubelet's webhook modes: bearer tokens checked by
	// the API server's TokenReview, client certificates by ClientCA, and
	// every request authorized by a SubjectAccessReview. It always serves
	// HTTPS: with a self-signed certificate made at start if no TLS files
	// are given, as the kubelet does.
	AuthWebhook = "webhook"
)

// Options say how one listener is protected. They are flags named after the
// listener (AddFlags), so that every message names the flag to change.
type Options struct {
	// Listener names the listener in flags (--<Listener>-tls-cert), log
	// lines and the denied counter's listener label.
	Listener string
	// TLSCert and TLSKey are PEM files, both or neither, reloaded when they
	// change.
	TLSCert, TLSKey string
	// ClientCA is a PEM bundle, reloaded when it changes: clients may
	// authenticate with a certificate it signed (needs TLS).
	ClientCA string
	// TokenFile holds a static bearer token (AuthNone only).
	TokenFile string
	// Auth is AuthNone (or empty) or AuthWebhook.
	Auth string
}

// AddFlags binds o to --<o.Listener>-tls-cert, -tls-key, -client-ca,
// -token-file and -auth.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	if o.Auth == "" {
		o.Auth = AuthNone
	}
	fs.StringVar(&o.TLSCert, o.flag("tls-cert"), o.TLSCert, "PEM certificate: serve over HTTPS (reloaded when it changes)")
	fs.StringVar(&o.TLSKey, o.flag("tls-key"), o.TLSKey, "PEM key of "+o.flag("tls-cert", true))
	fs.StringVar(&o.ClientCA, o.flag("client-ca"), o.ClientCA, "PEM CA bundle: accept client certificates it signed (needs HTTPS; reloaded when it changes)")
	fs.StringVar(&o.TokenFile, o.flag("token-file"), o.TokenFile, "file holding a static bearer token that requests must carry (not with webhook)")
	fs.StringVar(&o.Auth, o.flag("auth"), o.Auth, "none, or webhook: as the kubelet, bearer tokens checked by the API server's TokenReview and "+
		"every request authorized by a SubjectAccessReview on this node's nodes/metrics, nodes/stats or nodes/proxy (HTTPS; self-signed without "+
		o.flag("tls-cert", true)+")")
}

// flag is the name of one of the listener's flags, with the dashes when
// dashes is set (for messages).
func (o Options) flag(name string, dashes ...bool) string {
	f := o.Listener + "-" + name
	if len(dashes) > 0 && dashes[0] {
		return "--" + f
	}
	return f
}

// Paths are the files the options name, by flag (with dashes): for the
// caller's checks of paths, which are the plugin's rules, not this
// package's.
func (o Options) Paths() map[string]string {
	paths := map[string]string{}
	for _, f := range []struct{ name, path string }{
		{"tls-cert", o.TLSCert}, {"tls-key", o.TLSKey}, {"client-ca", o.ClientCA}, {"token-file", o.TokenFile},
	} {
		if f.path != "" {
			paths[o.flag(f.name, true)] = f.path
		}
	}
	return paths
}

// TLS reports whether the listener serves HTTPS.
func (o Options) TLS() bool { return o.TLSCert != "" || o.Auth == AuthWebhook }

// authenticates reports whether requests must authenticate.
func (o Options) authenticates() bool {
	return o.ClientCA != "" || o.TokenFile != "" || o.Auth == AuthWebhook
}

// Check checks the options for a listener on addr without reading a file:
// the flags that need each other, and that a listener off loopback serves
// HTTPS and authenticates every request.
func (o Options) Check(addr string) error {
	if !slices.Contains([]string{"", AuthNone, AuthWebhook}, o.Auth) {
		return fmt.Errorf("%s %q: expected %s or %s", o.flag("auth", true), o.Auth, AuthNone, AuthWebhook)
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("%s %q and %s %q: expected both or neither", o.flag("tls-cert", true), o.TLSCert, o.flag("tls-key", true), o.TLSKey)
	}
	if o.ClientCA != "" && !o.TLS() {
		return fmt.Errorf("%s %s: client certificates need HTTPS, expected %s and %s (or %s=%s) too",
			o.flag("client-ca", true), o.ClientCA, o.flag("tls-cert", true), o.flag("tls-key", true), o.flag("auth", true), AuthWebhook)
	}
	if o.TokenFile != "" && o.Auth == AuthWebhook {
		return fmt.Errorf("%s %s with %s=%s: expected one of them (the static token, or tokens checked by the API server)",
			o.flag("token-file", true), o.TokenFile, o.flag("auth", true), AuthWebhook)
	}
	if loopback(addr) {
		return nil
	}
	if !o.TLS() || !o.authenticates() {
		return fmt.Errorf("%s %s is not loopback: off loopback the endpoints need HTTPS and authentication, expected %s=%s "+
			"(as the kubelet: TokenReview and SubjectAccessReview) or %s and %s with %s or %s",
			o.flag("addr", true), addr, o.flag("auth", true), AuthWebhook,
			o.flag("tls-cert", true), o.flag("tls-key", true), o.flag("client-ca", true), o.flag("token-file", true))
	}
	return nil
}

// loopback reports whether addr listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
