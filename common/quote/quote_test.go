package quote

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestValue(t *testing.T) {
	long := strings.Repeat("a", Max+1)
	// A 3-byte character straddling the cut is left out whole.
	straddling := strings.Repeat("a", Max-1) + "€" + "b"
	for _, tc := range []struct{ name, in, want string }{
		{"short", "vendor.com/gpu=0", `"vendor.com/gpu=0"`},
		{"empty", "", `""`},
		{"escapes", "a\nb\x00", `"a\nb\x00"`},
		{"exactly Max", long[:Max], strconv.Quote(long[:Max])},
		{"one over", long, strconv.Quote(long[:Max]) + fmt.Sprintf("…(%d bytes)", Max+1)},
		{"cut before a character", straddling, strconv.Quote(straddling[:Max-1]) + fmt.Sprintf("…(%d bytes)", len(straddling))},
		// 64 of them quote to Max bytes, the 65th would pass it.
		{"escapes past Max", strings.Repeat("\xff", 100), `"` + strings.Repeat(`\xff`, 64) + `"…(100 bytes)`},
		{"escapes of a cut value", strings.Repeat("\x01", 2*Max), `"` + strings.Repeat(`\x01`, 64) + fmt.Sprintf(`"…(%d bytes)`, 2*Max)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Value(tc.in))
		})
	}
	assert.Equal(t, long[:Max]+fmt.Sprintf("…(%d bytes)", Max+1), Bare(long))
	assert.Equal(t, "cpu.nri-suite.io/pod", Bare("cpu.nri-suite.io/pod"))
}

func TestError(t *testing.T) {
	assert.NoError(t, Error(nil))
	short := errors.New("short")
	assert.Same(t, short, Error(short), "a short error is kept as it is")

	long := fmt.Errorf("invalid device %q: %w", strings.Repeat("x", 1<<20), fs.ErrInvalid)
	err := Error(long)
	assert.LessOrEqual(t, len(err.Error()), MaxError+len("…(9999999 bytes)"))
	assert.True(t, strings.HasPrefix(err.Error(), `invalid device "xxx`))
	assert.True(t, strings.HasSuffix(err.Error(), fmt.Sprintf("…(%d bytes)", len(long.Error()))))
	assert.ErrorIs(t, err, fs.ErrInvalid, "the cut error still wraps what it wrapped")
}

func FuzzValue(f *testing.F) {
	f.Add("vendor.com/gpu=0")
	f.Add(strings.Repeat("€", Max))
	f.Add(strings.Repeat("\x00", 4*Max))
	f.Add(strings.Repeat("a", Max-1) + "\xff\xfe")
	f.Add(strings.Repeat("\x80", 2*Max)) // no character starts anywhere
	f.Fuzz(func(t *testing.T, s string) {
		mark := fmt.Sprintf("…(%d bytes)", len(s))
		// The quoted text is at most Max bytes, and the mark names a length.
		v, b := Value(s), Bare(s)
		assert.LessOrEqual(t, len(v), Max+2+len(mark))
		quoted, marked := strings.CutSuffix(v, mark)
		text, err := strconv.Unquote(quoted)
		if !assert.NoError(t, err, "Value quotes as %%q: %s", v) {
			return
		}
		assert.True(t, strings.HasPrefix(s, text), "Value quotes the value's beginning")
		assert.Equal(t, text != s, marked, "a cut value, and only a cut one, is marked")

		assert.LessOrEqual(t, len(b), Max+len(mark))
		if len(s) <= Max {
			assert.Equal(t, s, b)
			return
		}
		prefix := strings.TrimSuffix(b, mark)
		assert.True(t, strings.HasPrefix(s, prefix), "the prefix is the value's")
		assert.GreaterOrEqual(t, len(prefix), Max-utf8.UTFMax+1, "at most one character is cut short")
		if utf8.ValidString(s) {
			assert.True(t, utf8.ValidString(prefix), "a valid value keeps a valid prefix")
		}
	})
}
