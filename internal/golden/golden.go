// Package golden pins what the suite writes to disk for other processes (the
// shared records, topology-aware's checkpoint) to files under testdata: a
// test encodes a sample whose every field is set and compares the bytes
// with the file, so that a change of a field's name, type or encoding that
// did not bump its schema version fails before a reader misreads it.
package golden

import (
	"encoding"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// update rewrites the golden files: `go test ./<package> -run Golden -update`.
// Do it only together with a bump of the version whose file changed, unless
// the change is one old readers accept (an optional field, omitted when empty).
var update = flag.Bool("update", false, "rewrite the golden files")

// File compares got with the golden file at path (rewriting it first with
// -update) and returns the file's bytes; what names the schema, for the
// message.
func File(t *testing.T, path, what string, got []byte) []byte {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file for %s: a new schema or version writes one with -update", what)
	assert.Equal(t, string(want), string(got),
		"%s is written differently from %s: bump its schema version (keeping the old file, which must be refused), or, for a change old readers accept, rewrite it with -update", what, path)
	return want
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// RequireAllSet fails when a field of sample that JSON encodes is its zero
// value (recursively through structs, the first element of slices and a
// value of maps): a field the sample leaves out would change nothing in the
// golden file. A type with its own encoding (time.Time, a cpuset) is one value.
func RequireAllSet(t *testing.T, name string, sample any) {
	t.Helper()
	requireSet(t, name, reflect.ValueOf(sample))
}

func requireSet(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch {
	case v.Type().Implements(jsonMarshaler) || v.Type().Implements(textMarshaler):
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			field := v.Type().Field(i)
			tag := field.Tag.Get("json")
			if tag == "-" || !field.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if field.Anonymous && name == "" {
				requireSet(t, path, v.Field(i))
				continue
			}
			requireSet(t, path+"."+field.Name, v.Field(i))
		}
		return
	case v.Kind() == reflect.Slice && v.Len() > 0:
		requireSet(t, path+"[0]", v.Index(0))
		return
	case v.Kind() == reflect.Map && v.Len() > 0:
		iter := v.MapRange()
		iter.Next()
		requireSet(t, path+"[…]", iter.Value())
		return
	}
	require.False(t, v.IsZero(), "%s is not set in the golden sample", path)
}
