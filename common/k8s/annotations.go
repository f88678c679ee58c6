package k8s

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nri-suite/nri-suite/common/quote"
)

// MaxAnnotationValue is the size limit of an annotation value the suite
// reads, unless the reader of a key sets its own (WithMaxValue): a longer
// value is refused before it is parsed. No value the suite's keys take comes
// near it; Kubernetes allows 256 KiB for all of a pod's annotations.
const MaxAnnotationValue = 4 << 10

// Annotations looks up the suite's annotations for one container.
//
// Only the pod's annotations are consulted. They are where a Pod's
// metadata.annotations reach the runtime, and the only ones the pod's author
// controls; a container's CRI annotations are written by the kubelet, the
// runtime and other NRI plugins, so reading them would let something other
// than the pod's author configure a plugin, and would make the same key mean
// different things on containerd and CRI-O.
type Annotations struct {
	pod       map[string]string
	container string
	maxValue  int
}

// NewAnnotations looks up keys in podAnnotations for the container named
// container (its Kubernetes name, see Identity.Container).
func NewAnnotations(podAnnotations map[string]string, container string) Annotations {
	return Annotations{pod: podAnnotations, container: container, maxValue: MaxAnnotationValue}
}

// WithMaxValue is a with max bytes as the size limit of the values it
// reads, for keys whose values are lists that may be longer than
// MaxAnnotationValue.
func (a Annotations) WithMaxValue(max int) Annotations {
	a.maxValue = max
	return a
}

// Keys returns the keys consulted for key, strongest first:
// <key>/container.<name>, <key>/pod, <key>. key is a bare prefix such as
// "cpu.nri-suite.io".
func (a Annotations) Keys(key string) []string {
	keys := make([]string, 0, 3)
	if a.container != "" {
		keys = append(keys, key+"/container."+a.container)
	}
	return append(keys, key+"/pod", key)
}

// Lookup returns the value of the strongest key present (see Keys) and that
// key. ok is false when none is present. The error, an *AnnotationError,
// refuses a value above the size limit, and any key under key+"/" other
// than <key>/pod and <key>/container.<name> ("cpu.nri-suite.io/bogus"): it
// can never apply, and ignoring it would hide a typo. A container.<name> key
// for a container the pod may not have is not refused: NRI does not say
// which containers a pod has.
func (a Annotations) Lookup(key string) (value, matched string, ok bool, err error) {
	// One pass over the pod's annotations, without building the keys: a
	// Synchronize looks up every container's.
	prefix, own := key+"/", "container."+a.container
	var bad string
	rank := 0 // of matched: 3 <key>/container.<name>, 2 <key>/pod, 1 <key>
	for k := range a.pod {
		suffix, under := strings.CutPrefix(k, prefix)
		switch {
		case k == key:
			if rank < 1 {
				matched, rank = k, 1
			}
		case !under:
		case suffix == "pod":
			if rank < 2 {
				matched, rank = k, 2
			}
		case a.container != "" && suffix == own:
			matched, rank = k, 3
		case validContainerForm(suffix):
		case bad == "" || k < bad:
			// The first in sorted order, so that the error is the same
			// every time.
			bad = k
		}
	}
	if bad != "" {
		return "", "", true, &AnnotationError{Key: bad, Value: a.pod[bad], Want: fmt.Sprintf(
			"a key of the form %s, %s/pod or %s/container.<name>, where <name> is a container's name (lowercase letters, digits and '-')",
			key, key, key)}
	}
	if rank == 0 {
		return "", "", false, nil
	}
	value = a.pod[matched]
	return value, matched, true, CheckSize(matched, value, a.maxValue)
}

// validContainerForm reports whether suffix, what follows <key>/, is
// container.<name> for a possible container name.
func validContainerForm(suffix string) bool {
	name, ok := strings.CutPrefix(suffix, "container.")
	return ok && IsDNSLabel(name)
}

// AnnotationDomain is the domain of an annotation key: its prefix
// ("cdi.k8s.io" of "cdi.k8s.io/claim"), or the key itself when it has none.
// Every form of one of the suite's keys (<key>, <key>/pod,
// <key>/container.<name>) has the same domain, and so has every standard
// CDI key.
func AnnotationDomain(key string) string {
	domain, _, _ := strings.Cut(key, "/")
	return domain
}

// AnnotationFor reports whether the pod annotation key is for the container
// named container: <domain>/container.<name> is for that container only,
// every other key for each container of the pod.
func AnnotationFor(key, container string) bool {
	_, suffix, _ := strings.Cut(key, "/")
	name, scoped := strings.CutPrefix(suffix, "container.")
	return !scoped || name == container
}

// CheckSize refuses the value of the annotation key when it is longer than
// max bytes, with an *AnnotationError that quotes only its beginning.
func CheckSize(key, value string, max int) error {
	if len(value) > max {
		return &AnnotationError{Key: key, Value: value, Want: fmt.Sprintf("a value of at most %d bytes", max)}
	}
	return nil
}

// AnnotationError is a present annotation whose value could not be used.
type AnnotationError struct {
	Key   string // the key that matched, e.g. "cpu.nri-suite.io/container.web"
	Value string // the value as written
	Want  string // what was expected, e.g. "an integer from 1 to 64"
	Err   error  // the parser's error, if one was involved
}

// Error quotes key and value at a bounded length (package quote).
func (e *AnnotationError) Error() string {
	return fmt.Sprintf("annotation %s=%s: want %s", quote.Bare(e.Key), quote.Value(e.Value), e.Want)
}

func (e *AnnotationError) Unwrap() error { return e.Err }

// parse looks key up and converts its trimmed value with conv. conv returns
// what it expected when it fails, so that every parser reports alike.
// Surrounding whitespace is ignored because YAML block scalars leave a
// trailing newline.
func parse[T any](a Annotations, key string, conv func(string) (T, string, error)) (T, bool, error) {
	var zero T
	raw, matched, ok, err := a.Lookup(key)
	if err != nil || !ok {
		return zero, ok, err
	}
	v, want, err := conv(strings.TrimSpace(raw))
	if want != "" {
		return zero, true, &AnnotationError{Key: matched, Value: raw, Want: want, Err: err}
	}
	return v, true, nil
}

// Bool parses the annotation as a boolean (true, false, 1, 0, t, f, ...).
// ok is false, with no error, when the annotation is absent.
func (a Annotations) Bool(key string) (v, ok bool, err error) {
	return parse(a, key, func(s string) (bool, string, error) {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return false, "a boolean (true or false)", err
		}
		return b, "", nil
	})
}

// Int parses the annotation as a decimal integer within [lo, hi].
func (a Annotations) Int(key string, lo, hi int64) (v int64, ok bool, err error) {
	return parse(a, key, func(s string) (int64, string, error) {
		want := fmt.Sprintf("an integer from %d to %d", lo, hi)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			return 0, want, err
		}
		return n, "", nil
	})
}

// Duration parses the annotation as a non-negative Go duration ("500ms", "2s").
func (a Annotations) Duration(key string) (v time.Duration, ok bool, err error) {
	return parse(a, key, func(s string) (time.Duration, string, error) {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, "a non-negative duration such as 500ms, 30s or 1m30s", err
		}
		return d, "", nil
	})
}

// maxQuantity keeps MilliValue() of an accepted quantity within int64.
const maxQuantity = math.MaxInt64 / 1000

// Quantity parses the annotation as a non-negative Kubernetes quantity
// ("500m", "2", "1Gi", "1e3") no larger than maxQuantity, so that the
// caller's Value() and MilliValue() cannot overflow.
func (a Annotations) Quantity(key string) (v resource.Quantity, ok bool, err error) {
	return parse(a, key, func(s string) (resource.Quantity, string, error) {
		want := fmt.Sprintf("a quantity such as 500m, 2 or 1Gi, from 0 to %d", int64(maxQuantity))
		q, err := ParseQuantity(s)
		if err != nil || q.Sign() < 0 || q.Cmp(*resource.NewQuantity(maxQuantity, resource.DecimalSI)) > 0 {
			return resource.Quantity{}, want, err
		}
		return q, "", nil
	})
}

// OneOf returns the annotation's value if it is one of allowed (exactly, as
// Kubernetes enums are case-sensitive).
func (a Annotations) OneOf(key string, allowed ...string) (v string, ok bool, err error) {
	return parse(a, key, func(s string) (string, string, error) {
		if !slices.Contains(allowed, s) {
			return "", "one of " + quoteAll(allowed), nil
		}
		return s, "", nil
	})
}

// List parses the annotation as a comma-separated list, trimming spaces
// around elements. An empty value is an empty list, so that a container-level
// annotation can clear a pod-level one; an empty element is an error.
func (a Annotations) List(key string) (v []string, ok bool, err error) {
	return parse(a, key, func(s string) ([]string, string, error) {
		if s == "" {
			return nil, "", nil
		}
		elems := strings.Split(s, ",")
		for i, e := range elems {
			elems[i] = strings.TrimSpace(e)
			if elems[i] == "" {
				return nil, "a comma-separated list without empty elements", nil
			}
		}
		return elems, "", nil
	})
}

// quoteAll renders allowed values for an error message: "a", "b", "c".
func quoteAll(values []string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = quote.Value(v)
	}
	return strings.Join(quoted, ", ")
}
