package simulate

import (
	"bytes"
	"fmt"
	"html/template"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/nri-suite/nri-suite/common/topology"
	"github.com/nri-suite/nri-suite/common/topology/cpuset"
)

// The placement map (--html) draws the machine as nested boxes: sockets
// one under the other, their NUMA nodes side by side (wrapping), the L3
// cache groups of each node, their cores in rows, and each core's threads
// as cells coloured by what holds the CPU at the end of the run. Every
// position is computed here (an SVG with absolute coordinates), so that a
// test can find each CPU's cell in a screenshot.

// Sizes of the map, in CSS pixels.
const (
	cellWidth, cellHeight = 34, 22
	corePad               = 2 // around a core's threads
	coreGap               = 4 // between cores
	coresPerRow           = 6
	groupPad              = 6  // inside a node, an L3 group, a socket
	labelHeight           = 16 // above the contents of a box
	mapMaxWidth           = 1600
)

// rect is a box of the map.
type rect struct{ X, Y, W, H int }

// mapBox is a labelled frame: a socket, a node or an L3 group.
type mapBox struct {
	rect
	Label string
	Class string
}

// machineLayout is where the map draws each part of the machine.
type machineLayout struct {
	Width, Height int
	Boxes         []mapBox
	Cores         []rect
	CPUs          map[int]rect // each thread's cell
}

// layoutMachine lays the machine out.
func layoutMachine(t *topology.Topology) machineLayout {
	l := machineLayout{CPUs: map[int]rect{}}
	cores := t.Cores()
	y := 0
	for _, socket := range t.Sockets() {
		socketCPUs := t.CPUsOfSocket(socket)
		socketAt := len(l.Boxes)
		l.Boxes = append(l.Boxes, mapBox{rect: rect{Y: y}, Label: fmt.Sprintf("socket %d", socket), Class: "socket"})
		x, rowY, rowH := groupPad, y+labelHeight, 0
		for _, node := range t.Nodes() {
			nodeCPUs := t.CPUsOfNode(node).Intersection(socketCPUs)
			if nodeCPUs.IsEmpty() {
				continue
			}
			n := layoutNode(cores, node, l3Groups(t, nodeCPUs))
			if x > groupPad && x+n.box.W > mapMaxWidth {
				x, rowY, rowH = groupPad, rowY+rowH+groupPad, 0
			}
			l.add(n, x, rowY)
			x += n.box.W + groupPad
			rowH = max(rowH, n.box.H)
			l.Width = max(l.Width, x)
		}
		l.Boxes[socketAt].H = rowY + rowH + groupPad - y
		y += l.Boxes[socketAt].H + groupPad
	}
	// Sockets span the map's width.
	for i := range l.Boxes {
		if l.Boxes[i].Class == "socket" {
			l.Boxes[i].W = l.Width
		}
	}
	l.Height = y
	return l
}

// nodeLayout is a node's part of the map, laid out at the origin.
type nodeLayout struct {
	box   mapBox
	boxes []mapBox
	cores []rect
	cpus  map[int]rect
}

// layoutNode lays a node's L3 groups, their cores and threads out.
func layoutNode(cores []topology.Core, node int, groups []l3Group) nodeLayout {
	n := nodeLayout{cpus: map[int]rect{}}
	y, width := labelHeight, 0
	for _, group := range groups {
		groupBox := mapBox{rect: rect{X: groupPad, Y: y}, Label: group.label, Class: "l3"}
		cx, cy, col, rowH := 2*groupPad, y+labelHeight, 0, 0
		for _, core := range cores {
			threads := core.CPUs.Intersection(group.cpus)
			if threads.IsEmpty() {
				continue
			}
			if col == coresPerRow {
				col, cx, cy = 0, 2*groupPad, cy+rowH+coreGap
			}
			coreRect := rect{X: cx, Y: cy, W: threads.Size()*cellWidth + 2*corePad, H: cellHeight + 2*corePad}
			n.cores = append(n.cores, coreRect)
			for i, id := range threads.List() {
				n.cpus[id] = rect{X: cx + corePad + i*cellWidth, Y: cy + corePad, W: cellWidth, H: cellHeight}
			}
			cx += coreRect.W + coreGap
			rowH = max(rowH, coreRect.H)
			groupBox.W = max(groupBox.W, cx-groupPad)
			col++
		}
		groupBox.H = cy + rowH + groupPad - y
		n.boxes = append(n.boxes, groupBox)
		y += groupBox.H + groupPad
		width = max(width, groupBox.X+groupBox.W+groupPad)
	}
	n.box = mapBox{rect: rect{W: width, H: y}, Label: fmt.Sprintf("NUMA node %d", node), Class: "node"}
	return n
}

// add puts a node's layout on the map at x, y.
func (l *machineLayout) add(n nodeLayout, x, y int) {
	move := func(r rect) rect { return rect{X: r.X + x, Y: r.Y + y, W: r.W, H: r.H} }
	l.Boxes = append(l.Boxes, mapBox{rect: move(n.box.rect), Label: n.box.Label, Class: n.box.Class})
	for _, b := range n.boxes {
		l.Boxes = append(l.Boxes, mapBox{rect: move(b.rect), Label: b.Label, Class: b.Class})
	}
	for _, c := range n.cores {
		l.Cores = append(l.Cores, move(c))
	}
	for id, c := range n.cpus {
		l.CPUs[id] = move(c)
	}
}

type l3Group struct {
	label string
	cpus  cpuset.CPUSet
}

// l3Groups splits cpus by their L3 cache; CPUs whose L3 is unknown form a
// group of their own.
func l3Groups(t *topology.Topology, cpus cpuset.CPUSet) []l3Group {
	var out []l3Group
	rest := cpus
	for _, g := range t.L3Groups() {
		if in := g.CPUs.Intersection(cpus); !in.IsEmpty() {
			out = append(out, l3Group{label: fmt.Sprintf("L3 %d", g.ID), cpus: in})
			rest = rest.Difference(in)
		}
	}
	if !rest.IsEmpty() {
		out = append(out, l3Group{label: "L3 unknown", cpus: rest})
	}
	return out
}

// Colours of the CPUs that no container holds of its own.
const (
	colourShared      = "#a6cee3"
	colourReserved    = "#f2c14e"
	colourIsolated    = "#e0e0e0"
	colourUnavailable = "#707070"
)

// containerColour is the n-th colour for a container or a pod: hues a
// golden angle apart, saturated and dark enough to stand apart from the
// pools' light colours.
func containerColour(n int) string {
	hue := math.Mod(float64(n)*137.508, 360)
	lightness := 0.42
	if n%2 == 1 {
		lightness = 0.32
	}
	return hslColour(hue, 0.7, lightness)
}

// hslColour is the CSS hex colour of hue (degrees), saturation and
// lightness (0 to 1).
func hslColour(hue, sat, light float64) string {
	c := (1 - math.Abs(2*light-1)) * sat
	x := c * (1 - math.Abs(math.Mod(hue/60, 2)-1))
	m := light - c/2
	var r, g, b float64
	switch {
	case hue < 60:
		r, g, b = c, x, 0
	case hue < 120:
		r, g, b = x, c, 0
	case hue < 180:
		r, g, b = 0, c, x
	case hue < 240:
		r, g, b = 0, x, c
	case hue < 300:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	byteOf := func(v float64) int { return int(math.Round((v + m) * 255)) }
	return fmt.Sprintf("#%02x%02x%02x", byteOf(r), byteOf(g), byteOf(b))
}

// textColour is black or white, whichever reads on fill.
func textColour(fill string) string {
	var r, g, b int
	_, _ = fmt.Sscanf(fill, "#%02x%02x%02x", &r, &g, &b)
	if 0.299*float64(r)+0.587*float64(g)+0.114*float64(b) > 150 {
		return "#000000"
	}
	return "#ffffff"
}

// mapCell is a CPU's cell on the map.
type mapCell struct {
	rect
	CPU                int
	Fill, Text, Holder string
}

// holderRow is a container or a pod that holds CPUs of its own, in the
// map's legend.
type holderRow struct {
	Colour, Name, Pool, CPUs, Mems, Reason string
}

// refusal is a container refused during the run, for the map.
type refusal struct {
	Step int
	Position
	Rejection
}

// mapPage is what the map's template draws.
type mapPage struct {
	Machine       MachineInfo
	StepsRun      int
	Failure       *Failure
	Width, Height int
	Boxes         []mapBox
	Cores         []rect
	Cells         []mapCell
	Colours       map[string]string // the pools' colours by name
	Holders       []holderRow
	State         *State
	Shared        []ContainerPlacement
	Reserved      []ContainerPlacement
	Refusals      []refusal
}

// cellFills says what holds every CPU of the machine at the end: a
// container's or pod's colour, or a pool's; and the legend of the holders.
func cellFills(t *topology.Topology, m MachineInfo, st *State) (map[int][2]string, []holderRow) {
	fills := map[int][2]string{}
	paint := func(set cpuset.CPUSet, colour, holder string) {
		for _, id := range set.List() {
			fills[id] = [2]string{colour, holder}
		}
	}
	for _, id := range t.CPUs().List() {
		fills[id] = [2]string{colourUnavailable, "not available to the plugin"}
	}
	paint(parseOrEmpty(m.Isolated), colourIsolated, "isolated, free")
	paint(parseOrEmpty(st.SharedCPUs), colourShared, "shared pool")
	paint(parseOrEmpty(m.Reserved), colourReserved, "reserved")
	var holders []holderRow
	for _, c := range st.Containers {
		if c.Pool != "exclusive" && c.Pool != "isolated" {
			continue
		}
		colour := containerColour(len(holders))
		name := c.Namespace + "/" + c.Pod + "/" + c.Container
		holders = append(holders, holderRow{Colour: colour, Name: name, Pool: c.Pool, CPUs: c.CPUs, Mems: c.Mems, Reason: c.Reason})
		paint(parseOrEmpty(c.CPUs), colour, name+" ("+c.Pool+")")
	}
	for _, pod := range slices.Sorted(maps.Keys(st.PodReservations)) {
		// What the pod's exclusive containers do not hold: its shared pool,
		// and what it keeps for containers not created yet.
		held := parseOrEmpty(st.PodReservations[pod])
		for _, c := range st.Containers {
			if c.Namespace+"/"+c.Pod == pod && (c.Pool == "exclusive" || c.Pool == "isolated") {
				held = held.Difference(parseOrEmpty(c.CPUs))
			}
		}
		colour := containerColour(len(holders))
		holders = append(holders, holderRow{Colour: colour, Name: "pod " + pod, Pool: "pod reservation", CPUs: held.String(),
			Reason: "topology manager scope pod: held for the pod's shared pool and its containers to come"})
		paint(held, colour, "pod "+pod+" (reservation)")
	}
	return fills, holders
}

func parseOrEmpty(s string) cpuset.CPUSet {
	set, _ := cpuset.Parse(s)
	return set
}

// htmlSink writes the placement map of the final state to a file once the
// run ends, with the refusals of every step.
type htmlSink struct {
	path     string
	topo     *topology.Topology
	machine  MachineInfo
	refusals []refusal
	failure  *Failure
}

func (h *htmlSink) Write(r Record) error {
	switch {
	case r.Machine != nil:
		h.machine = *r.Machine
	case r.Step != nil:
		for _, rej := range r.Step.Rejected {
			h.refusals = append(h.refusals, refusal{Step: r.Step.Step, Position: r.Step.Position, Rejection: rej})
		}
	case r.Error != nil:
		h.failure = r.Error
	case r.Final != nil:
		return h.write(r.Final)
	}
	return nil
}

func (h *htmlSink) write(st *State) error {
	l := layoutMachine(h.topo)
	fills, holders := cellFills(h.topo, h.machine, st)
	page := mapPage{
		Machine: h.machine, StepsRun: st.StepsRun, Failure: h.failure,
		Width: l.Width, Height: l.Height, Boxes: l.Boxes, Cores: l.Cores,
		Colours: map[string]string{"shared pool": colourShared, "reserved": colourReserved,
			"isolated, free": colourIsolated, "not available to the plugin": colourUnavailable},
		Holders: holders, State: st, Refusals: h.refusals,
	}
	for _, id := range slices.Sorted(maps.Keys(l.CPUs)) {
		fill := fills[id]
		page.Cells = append(page.Cells, mapCell{rect: l.CPUs[id], CPU: id, Fill: fill[0], Text: textColour(fill[0]), Holder: fill[1]})
	}
	for _, c := range st.Containers {
		switch c.Pool {
		case "shared", "pod-shared":
			page.Shared = append(page.Shared, c)
		case "reserved":
			page.Reserved = append(page.Reserved, c)
		}
	}
	var b bytes.Buffer
	if err := mapTemplate.Execute(&b, page); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := os.WriteFile(h.path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	return nil
}

var mapTemplate = template.Must(template.New("map").Funcs(template.FuncMap{
	"add":      func(a, b int) int { return a + b },
	"half":     func(a int) int { return a / 2 },
	"cpus":     milliCPUs,
	"joinInts": func(v []int) string { return strings.Trim(fmt.Sprint(v), "[]") },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>nri-topology-aware simulate: {{.Machine.Source}}</title>
<style>
body { margin: 0; font: 13px sans-serif; }
svg { display: block; }
svg text { font: 11px sans-serif; }
.socket { fill: #f4f4f4; stroke: #333; }
.node { fill: #ffffff; stroke: #555; }
.l3 { fill: #eef2f7; stroke: #99a; }
.core { fill: #c8c8c8; }
.cell { stroke: #ffffff; stroke-width: 1; }
section { padding: 6px 12px; }
table { border-collapse: collapse; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
.swatch { display: inline-block; width: 14px; height: 14px; vertical-align: middle; border: 1px solid #888; }
.failure { color: #b00000; font-weight: bold; }
</style></head>
<body>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}">
{{- range .Boxes}}
<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"/><text x="{{add .X 4}}" y="{{add .Y 12}}">{{.Label}}</text>
{{- end}}
{{- range .Cores}}
<rect class="core" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}"/>
{{- end}}
{{- range .Cells}}
<g><title>cpu {{.CPU}}: {{.Holder}}</title><rect class="cell" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Fill}}"/><text x="{{add .X (half .W)}}" y="{{add .Y (half .H)}}" fill="{{.Text}}" text-anchor="middle" dominant-baseline="central">{{.CPU}}</text></g>
{{- end}}
</svg>
<section>
<h1>Placement map</h1>
<p>{{.Machine.Source}}: CPUs {{.Machine.CPUs}}, NUMA nodes {{joinInts .Machine.Nodes}}; after step {{.StepsRun}}.</p>
{{- with .Failure}}
<p class="failure">The run stopped at step {{.Step}} ({{.Position}}): {{.Message}}</p>
{{- end}}
<p>{{range $name, $colour := .Colours}}<span class="swatch" style="background: {{$colour}}"></span> {{$name}} &nbsp; {{end}}</p>
</section>
<section>
<h2>CPUs held by a container or a pod</h2>
<table><tr><th></th><th>holder</th><th>pool</th><th>cpus</th><th>mems</th><th>why</th></tr>
{{- range .Holders}}
<tr><td><span class="swatch" style="background: {{.Colour}}"></span></td><td>{{.Name}}</td><td>{{.Pool}}</td><td>{{.CPUs}}</td><td>{{.Mems}}</td><td>{{.Reason}}</td></tr>
{{- end}}
</table>
</section>
<section>
<h2>The shared pool: cpus {{.State.SharedCPUs}}, mems {{.State.SharedMems}}</h2>
<table><tr><th>container</th><th>pool</th><th>cpu request</th><th>cpus</th><th>mems</th></tr>
{{- range .Shared}}
<tr><td>{{.Namespace}}/{{.Pod}}/{{.Container}}</td><td>{{.Pool}}</td><td>{{cpus .CPURequest}}</td><td>{{.CPUs}}</td><td>{{.Mems}}</td></tr>
{{- end}}
</table>
</section>
<section>
<h2>The reserved CPUs: {{.Machine.Reserved}}</h2>
<table><tr><th>container</th><th>cpu request</th><th>cpus</th><th>mems</th></tr>
{{- range .Reserved}}
<tr><td>{{.Namespace}}/{{.Pod}}/{{.Container}}</td><td>{{cpus .CPURequest}}</td><td>{{.CPUs}}</td><td>{{.Mems}}</td></tr>
{{- end}}
</table>
</section>
<section>
<h2>Warnings</h2>
<ul>
{{- range .State.Warnings}}
<li>{{.Message}}</li>
{{- else}}
<li>none</li>
{{- end}}
</ul>
</section>
<section>
<h2>Refusals</h2>
<table><tr><th>step</th><th>at</th><th>container</th><th>why</th></tr>
{{- range .Refusals}}
<tr><td>{{.Step}}</td><td>{{.Position}}</td><td>{{.Namespace}}/{{.Pod}}/{{.Container}}</td><td>{{.Error}}</td></tr>
{{- end}}
</table>
</section>
</body></html>
`))
