package k8s

import (
	"fmt"
	"strings"

	"github.com/nri-suite/nri-suite/common/quote"
)

// IsDNSLabel reports whether s is an RFC 1123 label (at most 63 lowercase
// letters, digits and '-', starting and ending with a letter or digit): the
// form of namespace, container and RuntimeClass handler names.
func IsDNSLabel(s string) bool {
	ok := s != "" && len(s) <= 63 && s[0] != '-' && s[len(s)-1] != '-'
	for _, c := range s {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
	}
	return ok
}

// IsDNSSubdomain reports whether s is an RFC 1123 subdomain (at most 253
// characters, RFC 1123 labels joined by '.'): the form of an annotation
// key's prefix, such as cdi.k8s.io.
func IsDNSSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if !IsDNSLabel(label) {
			return false
		}
	}
	return true
}

// CheckNamespace accepts a Kubernetes namespace name, found under the
// config key key: a name that is not one matches no pod, so a setting for
// it would silently apply nowhere.
func CheckNamespace(key, ns string) error {
	if !IsDNSLabel(ns) {
		return fmt.Errorf("%s: %s: expected a Kubernetes namespace name (at most 63 lowercase letters, digits and '-')", key, quote.Value(ns))
	}
	return nil
}
