// Package valuesdoc writes the table of the chart's values for its README:
// every key of values.yaml and of values.schema.json with its type (the
// schema's), default (values.yaml's) and description (the comment right
// above the key or beside it in values.yaml, else the schema's
// description). The keys of every plugin share rows: plugins.<name>.port
// is one row with each plugin's default.
package valuesdoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Begin and End mark the table in the README.
const (
	Begin = "<!-- values table: generated from values.yaml and values.schema.json by `make chart-docs`; do not edit -->"
	End   = "<!-- end of values table -->"
)

// pluginsKey holds one object per plugin, documented together.
const pluginsKey = "plugins"

type row struct {
	key, typ, def, desc string
}

// Table returns the Markdown table of the values in values (values.yaml)
// and schema (values.schema.json). A key of values.yaml that the schema
// does not have, or keys with neither comment nor description, are an
// error naming them.
func Table(values, schema []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return "", fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", errors.New("values.yaml: expected a mapping")
	}
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return "", fmt.Errorf("values.schema.json: %w", err)
	}
	w := &walker{root: root}
	rows, err := w.object(nil, doc.Content[0], root)
	if err != nil {
		return "", err
	}
	if err := errors.Join(w.undocumented...); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| key | type | default | description |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.key, escape(r.typ), escape(r.def), escape(r.desc))
	}
	return b.String(), nil
}

// Splice returns readme with the table between Begin and End replaced.
func Splice(readme []byte, table string) ([]byte, error) {
	before, rest, ok := bytes.Cut(readme, []byte(Begin+"\n"))
	if !ok {
		return nil, fmt.Errorf("no line %q", Begin)
	}
	_, after, ok := bytes.Cut(rest, []byte(End))
	if !ok {
		return nil, fmt.Errorf("no %q after %q", End, Begin)
	}
	return slices.Concat(before, []byte(Begin+"\n"), []byte(table), []byte(End), after), nil
}

type walker struct {
	root         map[string]any // the schema, for $ref
	undocumented []error        // every key without a description
}

// object returns the rows of the keys of an object: those of node (a
// mapping of values.yaml, or nil) in its order, then those only the schema
// has, sorted.
func (w *walker) object(path []string, node *yaml.Node, schema map[string]any) ([]row, error) {
	props, _ := schema["properties"].(map[string]any)
	seen := map[string]bool{}
	var rows []row
	if node != nil {
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, value := node.Content[i], node.Content[i+1]
			seen[key.Value] = true
			sub, ok := props[key.Value].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("values.yaml: %s is not in values.schema.json", strings.Join(append(path, key.Value), "."))
			}
			r, err := w.key(append(slices.Clone(path), key.Value), key, value, sub)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if !seen[name] {
			sub, _ := props[name].(map[string]any)
			r, err := w.key(append(slices.Clone(path), name), nil, nil, sub)
			if err != nil {
				return nil, err
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

// key returns the rows of one key: the key's own, and its children's when
// it is an object of known keys set in values.yaml (a $ref is a type of
// its own, documented whole).
func (w *walker) key(path []string, key, value *yaml.Node, schema map[string]any) ([]row, error) {
	target, desc, err := w.resolve(schema)
	if err != nil {
		return nil, fmt.Errorf("values.schema.json: %s: %w", strings.Join(path, "."), err)
	}
	if c := comment(key, value); c != "" {
		desc = c
	}
	name := strings.Join(path, ".")
	_, inline := target["properties"]
	inline = inline && schema["$ref"] == nil && value != nil && value.Kind == yaml.MappingNode && len(value.Content) > 0
	if !inline {
		if desc == "" {
			w.undocumented = append(w.undocumented, fmt.Errorf("%s: no comment in values.yaml and no description in values.schema.json", name))
		}
		def, err := defaultOf(value)
		if err != nil {
			return nil, fmt.Errorf("values.yaml: %s: %w", name, err)
		}
		return []row{{key: name, typ: typeOf(target), def: def, desc: desc}}, nil
	}
	var rows []row
	if desc != "" {
		rows = append(rows, row{key: name, typ: "object", desc: desc})
	}
	children, err := w.object(path, value, target)
	if err != nil {
		return nil, err
	}
	if name == pluginsKey {
		children = perPlugin(pluginNames(value, target), children)
	}
	return append(rows, children...), nil
}

// resolve follows schema's $refs; the description is the first one on the
// way.
func (w *walker) resolve(schema map[string]any) (map[string]any, string, error) {
	desc, _ := schema["description"].(string)
	for hops := 0; schema["$ref"] != nil; hops++ {
		ref, _ := schema["$ref"].(string)
		pointer, ok := strings.CutPrefix(ref, "#/")
		if !ok || hops > 10 {
			return nil, "", fmt.Errorf("$ref %q: expected a pointer into this schema", ref)
		}
		var node any = w.root
		for _, tok := range strings.Split(pointer, "/") {
			m, _ := node.(map[string]any)
			node = m[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
		}
		if schema, ok = node.(map[string]any); !ok {
			return nil, "", fmt.Errorf("$ref %q: no such schema", ref)
		}
		if desc == "" {
			desc, _ = schema["description"].(string)
		}
	}
	return schema, desc, nil
}

// pluginNames are the plugins in values.yaml's order, then the schema's
// others.
func pluginNames(node *yaml.Node, schema map[string]any) []string {
	var names []string
	for i := 0; i < len(node.Content); i += 2 {
		names = append(names, node.Content[i].Value)
	}
	props, _ := schema["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// perPlugin folds the rows of plugins.<plugin>.<key> into one row per key:
// plugins.<name>.<key>, or under the plugin's name when only one has it.
// The default is the plugins' if they agree, else each plugin's (always
// when some plugins lack the key); so is the description.
func perPlugin(plugins []string, rows []row) []row {
	var order []string
	byKey := map[string][]entry{}
	for _, r := range rows {
		plugin, key, _ := strings.Cut(strings.TrimPrefix(r.key, pluginsKey+"."), ".")
		// plugins.<plugin> itself is documented by plugins' comment.
		if key == "" {
			continue
		}
		if _, ok := byKey[key]; !ok {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], entry{plugin, r})
	}
	var out []row
	for _, key := range order {
		entries := byKey[key]
		name := "<name>"
		if len(entries) == 1 {
			name = entries[0].plugin
		}
		defs := groupBy(entries, func(e entry) string { return e.def })
		def := defs.join("; ", "%s: %s")
		if len(defs) == 1 && (len(entries) == len(plugins) || len(entries) == 1) {
			def = defs[0].value
		}
		descs := groupBy(entries, func(e entry) string { return e.desc })
		desc := descs.join(" ", "(%s) %s")
		if len(descs) == 1 {
			desc = descs[0].value
		}
		out = append(out, row{key: pluginsKey + "." + name + "." + key, typ: entries[0].typ, def: def, desc: desc})
	}
	return out
}

// entry is a row of one plugin's.
type entry struct {
	plugin string
	row
}

// group is the plugins that share a value.
type group struct {
	value   string
	plugins []string
}

type groups []group

// groupBy groups entries by a field, in the order the values come.
func groupBy(entries []entry, field func(entry) string) groups {
	var gs groups
	for _, e := range entries {
		v := field(e)
		i := slices.IndexFunc(gs, func(g group) bool { return g.value == v })
		if i < 0 {
			gs, i = append(gs, group{value: v}), len(gs)
		}
		gs[i].plugins = append(gs[i].plugins, e.plugin)
	}
	return gs
}

// join formats each group with its plugins and value.
func (gs groups) join(sep, format string) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = fmt.Sprintf(format, strings.Join(g.plugins, ", "), g.value)
	}
	return strings.Join(parts, sep)
}

// comment is the comment block right above key (its last paragraph) and
// the comment beside it, without the #s.
func comment(key, value *yaml.Node) string {
	if key == nil {
		return ""
	}
	head := key.HeadComment
	if i := strings.LastIndex(head, "\n\n"); i >= 0 {
		head = head[i+2:]
	}
	line := key.LineComment
	if line == "" && value != nil {
		line = value.LineComment
	}
	var words []string
	for _, l := range strings.Split(head+"\n"+line, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if l != "" {
			words = append(words, l)
		}
	}
	return strings.Join(words, " ")
}

// typeOf says what the schema accepts.
func typeOf(s map[string]any) string {
	if enum, ok := s["enum"].([]any); ok {
		var values []string
		for _, v := range enum {
			b, _ := json.Marshal(v)
			values = append(values, string(b))
		}
		return "one of " + strings.Join(values, ", ")
	}
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, v := range t {
			types = append(types, fmt.Sprint(v))
		}
	}
	typ := strings.Join(types, " or ")
	if typ == "array" {
		items, _ := s["items"].(map[string]any)
		if it, ok := items["type"].(string); ok {
			return "list of " + it
		}
		return "list"
	}
	return typ
}

// defaultOf is values.yaml's value in YAML's flow style, or "unset".
func defaultOf(value *yaml.Node) (string, error) {
	if value == nil {
		return "unset", nil
	}
	if value.Kind == yaml.ScalarNode {
		if value.Tag == "!!str" {
			return "`" + strconv.Quote(value.Value) + "`", nil
		}
		return "`" + value.Value + "`", nil
	}
	out, err := yaml.Marshal(flowCopy(value))
	if err != nil {
		return "", err
	}
	return "`" + strings.TrimSpace(string(out)) + "`", nil
}

// flowCopy is node and its children in flow style, without comments.
func flowCopy(node *yaml.Node) *yaml.Node {
	c := *node
	c.Style = yaml.FlowStyle
	if c.Kind == yaml.ScalarNode {
		c.Style = node.Style &^ (yaml.LiteralStyle | yaml.FoldedStyle)
	}
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	c.Content = nil
	for _, child := range node.Content {
		c.Content = append(c.Content, flowCopy(child))
	}
	return &c
}

// escape keeps text as written in a table cell: outside `code`, HTML's
// and Markdown's emphasis characters are escaped; | everywhere.
func escape(text string) string {
	parts := strings.Split(text, "`")
	for i, p := range parts {
		p = strings.ReplaceAll(p, "|", `\|`)
		if i%2 == 0 {
			p = strings.NewReplacer("<", "&lt;", ">", "&gt;", "*", `\*`, "_", `\_`).Replace(p)
		}
		parts[i] = p
	}
	return strings.Join(parts, "`")
}

// README returns the chart's README.md with the table of its values.yaml
// and values.schema.json.
func README(chart string) ([]byte, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(chart, name)) }
	values, err := read("values.yaml")
	if err != nil {
		return nil, err
	}
	schema, err := read("values.schema.json")
	if err != nil {
		return nil, err
	}
	readme, err := read("README.md")
	if err != nil {
		return nil, err
	}
	table, err := Table(values, schema)
	if err != nil {
		return nil, err
	}
	out, err := Splice(readme, table)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(chart, "README.md"), err)
	}
	return out, nil
}
