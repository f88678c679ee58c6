package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"go.yaml.in/yaml/v3"

	"github.com/nri-suite/nri-suite/common/fsread"
	"github.com/nri-suite/nri-suite/common/quote"
)

// Configurable is implemented by a plugin that takes configuration. Configure is called
// with the --config file at start (source is the file name) and again whenever the
// runtime delivers a non-empty configuration through NRI (pre-registered plugins get
// theirs from the runtime's conf.d). A --config file that cannot be read or applied
// holds the plugin off the runtime, not ready and saying why, until a version of the
// file applies (Run); an error from the runtime's configuration fails that
// registration.
type Configurable interface {
	Configure(data []byte, source string) error
}

// RuntimeAware is implemented by a plugin whose behaviour depends on which runtime it
// is attached to (CRI-O v1.34 drops CDI adjustments, for one). SetRuntime is called at
// every registration, before Synchronize, with the name and version the runtime
// reports through NRI (e.g. "containerd", "v2.4.2").
type RuntimeAware interface {
	SetRuntime(name, version string)
}

// FailClosed is implemented by a plugin whose checks must never be skipped: when it
// does not answer a request in time, or its connection breaks during one, the runtime
// fails that request instead of going on without the plugin (NRI's failure policy,
// fail_request). Runtimes whose NRI predates failure policies (before v0.12.5:
// containerd v2.4.2, CRI-O v1.34) ignore it, and only their configuration's required
// plugins stand between a silent plugin and the containers after it is dropped.
type FailClosed interface {
	FailClosed() bool
}

// EventFilter is implemented by a plugin that must not subscribe to every event it
// handles on every runtime or configuration: a runtime whose NRI predates an event
// refuses a plugin that asks for it (CRI-O v1.34 and validation). Events is called at
// every registration, after SetRuntime and the configuration, with the events the
// plugin implements; the plugin subscribes to what it returns (bits outside
// implemented are ignored).
type EventFilter interface {
	Events(implemented api.EventMask) api.EventMask
}

// unknownFieldRE matches yaml.v3's report of a key that has no struct field.
var unknownFieldRE = regexp.MustCompile(`^line (\d+): field (.+) not found in type .+$`)

// DecodeConfig decodes YAML strictly into out: a key without a matching field is an
// error. Fields absent from data keep the values out already holds (the defaults), and
// empty data leaves out untouched. Errors name source and, for a key, the key and line.
func DecodeConfig(data []byte, source string, out any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) { // only comments
			return nil
		}
		return fmt.Errorf("decode config %s: %w", source, quote.Error(describeYAMLError(err, data)))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode config %s: expected a single YAML document, found more", source)
	}
	return nil
}

// describeYAMLError rewrites yaml.v3's "field x not found in type pkg.T" into words
// that a user editing the file understands: the key's dotted path in data
// ("classes.blockio.slow.weight"), as the type's name means nothing to them.
func describeYAMLError(err error, data []byte) error {
	var typeErr *yaml.TypeError
	if !errors.As(err, &typeErr) {
		return err
	}
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root) // it parsed once already; a failure leaves bare keys
	paths := keyPaths(&root)
	msgs := make([]string, 0, len(typeErr.Errors))
	for _, msg := range typeErr.Errors {
		if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			key := m[2]
			if path, ok := paths[lineKey{line, key}]; ok {
				key = path
			}
			msg = fmt.Sprintf("line %s: unknown key %s", m[1], quote.Value(key))
		}
		msgs = append(msgs, msg)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// lineKey is a mapping key as yaml.v3's errors name it: its line and text.
type lineKey struct {
	line int
	key  string
}

// keyPaths maps every mapping key of the document to its dotted path from
// the root (list items as [i]), in one walk: a configuration of many unknown
// keys costs no more than one of a few.
func keyPaths(root *yaml.Node) map[lineKey]string {
	paths := map[lineKey]string{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				paths[lineKey{k.Line, k.Value}] = p
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(root, "")
	return paths
}

// MaxConfigSize bounds the --config file; the suite's largest real
// configurations are a few KiB.
const MaxConfigSize = 1 << 20

// readConfigFile returns the bytes of the --config file. It must be a
// regular file: a FIFO would block the start until someone wrote to it.
// Links are followed, as a mounted ConfigMap's files are links.
func readConfigFile(path string) ([]byte, error) {
	data, err := fsread.File(path, MaxConfigSize)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return data, nil
}

// OneOf checks the value of an enumerated config key: empty means def, a value
// not in allowed is an error naming the key, the value and the allowed ones.
func OneOf[T ~string](key, value string, def T, allowed ...T) (T, error) {
	if value == "" {
		return def, nil
	}
	if slices.Contains(allowed, T(value)) {
		return T(value), nil
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", fmt.Errorf("%s: %s: expected one of %s", key, quote.Value(value), strings.Join(names, ", "))
}
