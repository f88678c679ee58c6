// Package quote renders user input in error messages at a bounded length, so
// that a megabyte annotation or config value is not echoed whole into the
// runtime's error, the kubelet's events and the plugin's log. Every message
// of the suite that quotes what a user wrote goes through it.
//
// A value longer than Max bytes (or whose quoted form is) is cut at a
// character boundary and marked with its full length:
// "vendor.com/gpu=aaaa"…(1048576 bytes).
package quote

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of a value a message quotes; any Kubernetes
// annotation key (at most 317 bytes) but the longest fits whole.
const Max = 256

// MaxError is how many bytes of an error's text Error keeps: room for a
// message that quotes a few values (a library's error, which quotes them
// whole, is cut there).
const MaxError = 1024

// Value is s quoted as %q quotes it, at most Max bytes of it, and at most
// Max bytes of quoted text: a value of escapes (\xff, \u00a0), each up to
// 10 bytes quoted, is cut further, so that a message quoting two values
// stays short.
func Value(s string) string {
	prefix, mark := cut(s, Max)
	if q := strconv.Quote(prefix); len(q) <= Max+2 {
		return q + mark
	}
	out := append(make([]byte, 0, Max+2), '"')
	for i := 0; i < len(prefix); {
		_, n := utf8.DecodeRuneInString(prefix[i:])
		quoted := strconv.Quote(prefix[i : i+n]) // an invalid byte alone, as Quote quotes it in a string
		piece := quoted[1 : len(quoted)-1]
		if len(out)+len(piece) > Max+1 {
			break
		}
		out = append(out, piece...)
		i += n
	}
	return string(append(out, '"')) + fmt.Sprintf("…(%d bytes)", len(s))
}

// Bare is s unquoted, at most Max bytes of it: for annotation keys, which
// messages print as they are.
func Bare(s string) string {
	prefix, mark := cut(s, Max)
	return prefix + mark
}

// Error is err with its text cut at MaxError bytes; errors.Is and errors.As
// still see err. For the errors of libraries that quote their input whole.
func Error(err error) error {
	if err == nil || len(err.Error()) <= MaxError {
		return err
	}
	return &bounded{err: err}
}

type bounded struct{ err error }

func (b *bounded) Error() string {
	prefix, mark := cut(b.err.Error(), MaxError)
	return prefix + mark
}

func (b *bounded) Unwrap() error { return b.err }

// cut returns the first n bytes of s or fewer, never half a character, and
// the mark of what was left out ("" when nothing was). It steps back at
// most to the start of the character at n: further, s is not UTF-8 anyway.
func cut(s string, n int) (prefix, mark string) {
	if len(s) <= n {
		return s, ""
	}
	i := n
	for i > n-utf8.UTFMax+1 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], fmt.Sprintf("…(%d bytes)", len(s))
}
