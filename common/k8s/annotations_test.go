package k8s

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testKey = "cpu.nri-suite.io"

func TestAnnotationsLookup(t *testing.T) {
	all := map[string]string{
		testKey + "/container.web": "container",
		testKey + "/pod":           "pod",
		testKey:                    "bare",
	}
	tests := []struct {
		name        string
		annotations map[string]string
		container   string
		wantValue   string
		wantMatched string
		wantOK      bool
	}{
		{"container beats pod and bare", all, "web", "container", testKey + "/container.web", true},
		{"another container's key is skipped", all, "sidecar", "pod", testKey + "/pod", true},
		{"pod beats bare", map[string]string{testKey + "/pod": "pod", testKey: "bare"}, "web", "pod", testKey + "/pod", true},
		{"bare alone", map[string]string{testKey: "bare"}, "web", "bare", testKey, true},
		{"container alone", map[string]string{testKey + "/container.web": "c"}, "web", "c", testKey + "/container.web", true},
		{"present but empty still matches", map[string]string{testKey + "/pod": "", testKey: "bare"}, "web", "", testKey + "/pod", true},
		{"unnamed container consults no container key", map[string]string{testKey + "/container.web": "x"}, "", "", "", false},
		{"other keys do not match", map[string]string{"mem.nri-suite.io": "1", testKey + "x/pod": "2", testKey + ".extra": "3"}, "web", "", "", false},
		{"nil annotations", nil, "web", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			value, matched, ok, err := NewAnnotations(tt.annotations, tt.container).Lookup(testKey)
			require.NoError(t, err)
			require.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.wantValue, value)
			assert.Equal(t, tt.wantMatched, matched)
		})
	}
}

// A key under the prefix in none of its forms can never apply: Lookup
// refuses it, naming it, whatever else is present.
func TestAnnotationsLookupRefusesUnknownForms(t *testing.T) {
	wantForms := "want a key of the form cpu.nri-suite.io, cpu.nri-suite.io/pod or cpu.nri-suite.io/container.<name>, " +
		"where <name> is a container's name (lowercase letters, digits and '-')"
	for _, tc := range []struct {
		name    string
		keys    []string
		wantKey string // "" for no error
	}{
		{"unknown suffix", []string{testKey + "/bogus"}, testKey + "/bogus"},
		{"beside a valid key", []string{testKey + "/pod", testKey + "/bogus"}, testKey + "/bogus"},
		{"empty suffix", []string{testKey + "/"}, testKey + "/"},
		{"pod with more", []string{testKey + "/pod/x"}, testKey + "/pod/x"},
		{"container without a name", []string{testKey + "/container."}, testKey + "/container."},
		{"container name no container can have", []string{testKey + "/container.Web_1"}, testKey + "/container.Web_1"},
		{"the first in order", []string{testKey + "/zz", testKey + "/aa"}, testKey + "/aa"},
		{"another container's key", []string{testKey + "/container.sidecar"}, ""},
		{"other prefixes are not looked at", []string{testKey + "x/bogus", "other.nri-suite.io/bogus"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := map[string]string{}
			for _, k := range tc.keys {
				pod[k] = "shared"
			}
			_, _, ok, err := NewAnnotations(pod, "web").Lookup(testKey)
			if tc.wantKey == "" {
				assert.NoError(t, err)
				return
			}
			assert.True(t, ok, "a refused key is present")
			var aerr *AnnotationError
			require.ErrorAs(t, err, &aerr)
			assert.Equal(t, "annotation "+tc.wantKey+`="shared": `+wantForms, err.Error())
		})
	}
}

// A value above the size limit is refused before it is parsed, and the
// error quotes only its beginning.
func TestAnnotationsLookupSizeLimit(t *testing.T) {
	at := strings.Repeat("a", MaxAnnotationValue)
	_, _, _, err := NewAnnotations(map[string]string{testKey: at}, "web").Lookup(testKey)
	assert.NoError(t, err, "a value at the limit is read")

	huge := strings.Repeat("a", 1<<20)
	for _, a := range []Annotations{
		NewAnnotations(map[string]string{testKey + "/pod": huge}, "web"),
		NewAnnotations(map[string]string{testKey + "/pod": at + "a"}, "web"),
	} {
		_, matched, ok, err := a.Lookup(testKey)
		assert.True(t, ok)
		assert.Equal(t, testKey+"/pod", matched)
		var aerr *AnnotationError
		require.ErrorAs(t, err, &aerr)
		assert.Contains(t, err.Error(), "annotation cpu.nri-suite.io/pod=\"aaaa")
		assert.Contains(t, err.Error(), fmt.Sprintf("bytes): want a value of at most %d bytes", MaxAnnotationValue))
		assert.Less(t, len(err.Error()), 1024, "the error quotes a bounded prefix")
		_, _, err = a.Bool(testKey)
		assert.ErrorAs(t, err, &aerr, "every parser refuses it")
	}

	long := NewAnnotations(map[string]string{testKey: at + "a"}, "web").WithMaxValue(2 * MaxAnnotationValue)
	_, _, _, err = long.Lookup(testKey)
	assert.NoError(t, err, "a reader may set its own limit")
	_, _, _, err = long.WithMaxValue(10).Lookup(testKey)
	assert.ErrorContains(t, err, "want a value of at most 10 bytes")
}

func TestAnnotationsKeys(t *testing.T) {
	assert.Equal(t, []string{testKey + "/container.web", testKey + "/pod", testKey}, NewAnnotations(nil, "web").Keys(testKey))
	assert.Equal(t, []string{testKey + "/pod", testKey}, NewAnnotations(nil, "").Keys(testKey))
}

// parserCase runs one typed parser on value stored under the pod-level key.
type parserCase struct {
	name    string
	parse   func(Annotations) (any, bool, error)
	value   string
	want    any    // the parsed value when wantErr is empty
	wantErr string // what the error says was expected
}

func bools(a Annotations) (any, bool, error) { return unpack(a.Bool(testKey)) }
func ints(a Annotations) (any, bool, error)  { return unpack(a.Int(testKey, -5, 64)) }
func durations(a Annotations) (any, bool, error) {
	return unpack(a.Duration(testKey))
}
func policies(a Annotations) (any, bool, error) {
	return unpack(a.OneOf(testKey, "static", "none"))
}
func lists(a Annotations) (any, bool, error) { return unpack(a.List(testKey)) }

// milliQuantity reports a quantity by its millivalue, which is what the
// suite's callers use, so that the table states plain numbers.
func milliQuantity(a Annotations) (any, bool, error) {
	q, ok, err := a.Quantity(testKey)
	return q.MilliValue(), ok, err
}

func unpack[T any](v T, ok bool, err error) (any, bool, error) { return v, ok, err }

func TestAnnotationParsers(t *testing.T) {
	const (
		wantBool     = "a boolean (true or false)"
		wantInt      = "an integer from -5 to 64"
		wantDuration = "a non-negative duration such as 500ms, 30s or 1m30s"
		wantQuantity = "a quantity such as 500m, 2 or 1Gi, from 0 to 9223372036854775"
		wantPolicy   = `one of "static", "none"`
		wantList     = "a comma-separated list without empty elements"
	)
	tests := []parserCase{
		{"bool true", bools, "true", true, ""},
		{"bool False", bools, "False", false, ""},
		{"bool 1", bools, "1", true, ""},
		{"bool trailing newline", bools, "true\n", true, ""},
		{"bool yes", bools, "yes", nil, wantBool},
		{"bool empty", bools, "", nil, wantBool},

		{"bool t", bools, "t", true, ""},
		{"int", ints, "4", int64(4), ""},
		{"int lower bound", ints, "-5", int64(-5), ""},
		{"int upper bound", ints, "64", int64(64), ""},
		{"int below", ints, "-6", nil, wantInt},
		{"int above", ints, "65", nil, wantInt},
		{"int hex", ints, "0x10", nil, wantInt},
		{"int fraction", ints, "1.5", nil, wantInt},
		{"int overflow", ints, "9223372036854775808", nil, wantInt},
		{"int empty", ints, "", nil, wantInt},

		{"duration ms", durations, "500ms", 500 * time.Millisecond, ""},
		{"duration compound", durations, "1m30s", 90 * time.Second, ""},
		{"duration zero", durations, "0", time.Duration(0), ""},
		{"duration negative", durations, "-1s", nil, wantDuration},
		{"duration without unit", durations, "5", nil, wantDuration},
		{"duration empty", durations, "", nil, wantDuration},

		{"quantity millicores", milliQuantity, "500m", int64(500), ""},
		{"quantity whole", milliQuantity, "2", int64(2000), ""},
		{"quantity decimal", milliQuantity, "0.5", int64(500), ""},
		{"quantity leading dot", milliQuantity, ".5", int64(500), ""},
		{"quantity exponent", milliQuantity, "1e3", int64(1_000_000), ""},
		{"quantity binary", milliQuantity, "1Gi", int64(1 << 30 * 1000), ""},
		{"quantity fractional binary", milliQuantity, "1.5Gi", int64(3 << 29 * 1000), ""},
		{"quantity decimal SI", milliQuantity, "100k", int64(100_000_000), ""},
		{"quantity zero", milliQuantity, "0", int64(0), ""},
		{"quantity surrounding spaces", milliQuantity, " 2 ", int64(2000), ""},
		{"quantity at the maximum", milliQuantity, "9223372036854775", int64(9223372036854775000), ""},
		{"quantity above the maximum", milliQuantity, "9223372036854776", nil, wantQuantity},
		{"quantity exbibyte", milliQuantity, "1Ei", nil, wantQuantity},
		{"quantity negative", milliQuantity, "-1", nil, wantQuantity},
		{"quantity bad suffix", milliQuantity, "1GiB", nil, wantQuantity},
		{"quantity lowercase suffix", milliQuantity, "1gi", nil, wantQuantity},
		{"quantity empty", milliQuantity, "", nil, wantQuantity},

		{"enum allowed", policies, "static", "static", ""},
		{"enum case matters", policies, "Static", nil, wantPolicy},
		{"enum empty", policies, "", nil, wantPolicy},

		{"list", lists, "a,b", []string{"a", "b"}, ""},
		{"list spaces", lists, " a , b ", []string{"a", "b"}, ""},
		{"list single", lists, "a", []string{"a"}, ""},
		{"list empty clears", lists, "", []string(nil), ""},
		{"list empty element", lists, "a,,b", nil, wantList},
		{"list trailing comma", lists, "a,", nil, wantList},
		{"list blank element", lists, "a, ,b", nil, wantList},
	}
	const matched = testKey + "/pod"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok, err := tt.parse(NewAnnotations(map[string]string{matched: tt.value}, "web"))
			require.True(t, ok, "a present annotation is ok")
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, v)
				return
			}
			var aerr *AnnotationError
			require.ErrorAs(t, err, &aerr)
			assert.Equal(t, AnnotationError{Key: matched, Value: tt.value, Want: tt.wantErr, Err: aerr.Err}, *aerr)
			assert.Equal(t, "annotation "+matched+"="+strconv.Quote(tt.value)+": want "+tt.wantErr, err.Error())
		})
	}
}

func TestAnnotationParsersAbsent(t *testing.T) {
	a := NewAnnotations(map[string]string{"other.nri-suite.io": "x"}, "web")
	for name, parse := range map[string]func(Annotations) (any, bool, error){
		"bool": bools, "int": ints, "duration": durations, "quantity": milliQuantity, "enum": policies, "list": lists,
	} {
		_, ok, err := parse(a)
		assert.False(t, ok, name)
		assert.NoError(t, err, name)
	}
}

// The error names the key that matched, not the key asked for, so that the
// user sees which of their annotations is wrong.
func TestAnnotationErrorNamesMatchedKey(t *testing.T) {
	a := NewAnnotations(map[string]string{testKey + "/container.web": "many", testKey: "2"}, "web")
	_, _, err := a.Int(testKey, 1, 8)
	require.Error(t, err)
	assert.EqualError(t, err, `annotation cpu.nri-suite.io/container.web="many": want an integer from 1 to 8`)
	var numErr *strconv.NumError
	assert.True(t, errors.As(err, &numErr), "the parser's error is wrapped")
}

func FuzzAnnotations(f *testing.F) {
	f.Add("true", "web", uint8(7))
	f.Add("500m", "", uint8(2))
	f.Add("a, b,,c", "sidecar", uint8(1))
	f.Add("1m30s", "web", uint8(4))
	f.Add("9223372036854775808", "x", uint8(3))
	f.Add("1e309", "web", uint8(6))
	f.Add("1e80000018", "0", uint8(6))                                 // once took 30 s to compare
	f.Add(strings.Repeat("vendor.com/gpu=0,", 1<<11), "web", uint8(4)) // 34 KiB
	f.Add("true", "Web_1", uint8(4))                                   // no container has that name
	f.Fuzz(func(t *testing.T, value, container string, present uint8) {
		// present picks which of the three keys hold value; the strongest wins.
		keys := NewAnnotations(nil, container).Keys(testKey)
		annotations := map[string]string{}
		var strongest string
		for i := len(keys) - 1; i >= 0; i-- {
			if present&(1<<(len(keys)-1-i)) != 0 {
				annotations[keys[i]] = value
				strongest = keys[i]
			}
		}
		a := NewAnnotations(annotations, container)
		check := func(name string, ok bool, err error) {
			require.Equal(t, strongest != "", ok, name)
			if err == nil {
				return
			}
			var aerr *AnnotationError
			require.ErrorAs(t, err, &aerr, name)
			assert.Equal(t, strongest, aerr.Key, name)
			assert.Equal(t, value, aerr.Value, name)
			assert.NotEmpty(t, aerr.Want, name)
			assert.Less(t, len(err.Error()), 2048, "%s: the error quotes bounded prefixes", name)
		}

		_, matched, ok, err := a.Lookup(testKey)
		check("lookup", ok, err)
		if err == nil {
			require.Equal(t, strongest, matched)
		}
		if strongest != "" && len(value) > MaxAnnotationValue {
			require.Error(t, err, "a value above the limit is refused")
		}

		b, ok, err := a.Bool(testKey)
		check("bool", ok, err)
		if ok && err == nil { // every spelling of true starts with 1, t or T
			assert.Equal(t, strings.ContainsAny(strings.TrimSpace(value)[:1], "1tT"), b)
		}

		n, ok, err := a.Int(testKey, -10, 10)
		check("int", ok, err)
		if ok && err == nil {
			assert.True(t, n >= -10 && n <= 10)
		}

		d, ok, err := a.Duration(testKey)
		check("duration", ok, err)
		assert.GreaterOrEqual(t, d, time.Duration(0))

		q, ok, err := a.Quantity(testKey)
		check("quantity", ok, err)
		if ok && err == nil {
			assert.GreaterOrEqual(t, q.MilliValue(), int64(0))
			assert.LessOrEqual(t, q.Value(), int64(maxQuantity))
		}

		e, ok, err := a.OneOf(testKey, "static", "none")
		check("enum", ok, err)
		if ok && err == nil {
			assert.Contains(t, []string{"static", "none"}, e)
		}

		l, ok, err := a.List(testKey)
		check("list", ok, err)
		for _, elem := range l {
			assert.NotEmpty(t, elem)
			assert.Equal(t, strings.TrimSpace(elem), elem)
			assert.NotContains(t, elem, ",")
		}
	})
}

func TestAnnotationDomainAndFor(t *testing.T) {
	for _, tc := range []struct {
		key, domain string
		forApp      bool
	}{
		{"cdi-devices.nri-suite.io", "cdi-devices.nri-suite.io", true},
		{"cdi-devices.nri-suite.io/pod", "cdi-devices.nri-suite.io", true},
		{"cdi-devices.nri-suite.io/container.app", "cdi-devices.nri-suite.io", true},
		{"cdi-devices.nri-suite.io/container.web", "cdi-devices.nri-suite.io", false},
		{"cdi-devices.nri-suite.io/container.", "cdi-devices.nri-suite.io", false},
		{"cdi.k8s.io/claim-0", "cdi.k8s.io", true},
		{"cdi.k8s.io/container.app", "cdi.k8s.io", true},
		{"cdi.k8s.io/container.application", "cdi.k8s.io", false},
		{"sidecar-order.nri-suite.io/sidecars", "sidecar-order.nri-suite.io", true},
		{"ready.sidecar-order.nri-suite.io/container.app", "ready.sidecar-order.nri-suite.io", true},
		{"app/container.web/x", "app", false},
		{"", "", true},
	} {
		assert.Equal(t, tc.domain, AnnotationDomain(tc.key), "domain of %q", tc.key)
		assert.Equal(t, tc.forApp, AnnotationFor(tc.key, "app"), "%q for container app", tc.key)
	}
}
