package collect

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/cgstats"
)

// TextContentType is the Prometheus text exposition format WriteText writes.
const TextContentType = "text/plain; version=0.0.4; charset=utf-8"

// family is one metric family of the text output.
type family struct {
	name, help, kind string
	// mid and tail are the family's own label pairs that go after the
	// container label and after the pod label (labels are in name order).
	mid, tail string
	// stamped: the samples carry the reading's time (all but the start and
	// creation times).
	stamped bool
	value   func(cg *cgroupLabels) (float64, bool)
}

// textFamilies are the cAdvisor families of one value per cgroup, in name
// order, as a registry would write them.
var textFamilies = func() []family {
	fams := []family{
		{name: startTimeName, help: startTimeHelp, kind: "gauge",
			value: func(cg *cgroupLabels) (float64, bool) { return cg.started, cg.started != 0 }},
		{name: creationTimeName, help: creationTimeHelp, kind: "gauge",
			value: func(cg *cgroupLabels) (float64, bool) { return cg.created, cg.created != 0 }},
		{name: lastSeenName, help: lastSeenHelp, kind: "gauge", stamped: true,
			value: func(cg *cgroupLabels) (float64, bool) { return cg.seen, true }},
	}
	for i := range cadvisorSeries {
		s := &cadvisorSeries[i]
		kind := "gauge"
		if s.kind == prometheus.CounterValue {
			kind = "counter"
		}
		f := family{name: s.name, help: s.help, kind: kind, stamped: true,
			value: func(cg *cgroupLabels) (float64, bool) { return s.value(cg.sample) }}
		for j := 0; j < len(s.labels); j += 2 {
			pair := "," + s.labels[j] + `="` + escape(s.labels[j+1]) + `"`
			switch {
			case s.labels[j] > "pod":
				f.tail += pair
			case s.labels[j] > "container" && s.labels[j] < "id":
				f.mid += pair
			default:
				panic("collect: no place for label " + s.labels[j] + " between cAdvisor's")
			}
		}
		fams = append(fams, f)
	}
	// Stable: the series of one family stay together, in their order.
	sort.SliceStable(fams, func(i, j int) bool { return fams[i].name < fams[j].name })
	return fams
}()

// cgroupLabels are one cgroup's label pairs, escaped, in pieces between
// which the extra labels of some families go (labels are written in name
// order): container="..." | cpu, device | id="...",image="..." | major,
// minor | name="...",namespace="..." | operation | pod="...".
type cgroupLabels struct {
	container, idImage, nameNamespace, pod string
	sample                                 *cgstats.Sample
	started, created                       float64 // 0: unknown
	seen                                   float64 // the reading's time, in whole seconds
}

func labelsOf(container, id, image, name, namespace, pod string) cgroupLabels {
	return cgroupLabels{
		container:     `container="` + escape(container) + `"`,
		idImage:       `id="` + escape(id) + `",image="` + escape(image) + `"`,
		nameNamespace: `name="` + escape(name) + `",namespace="` + escape(namespace) + `"`,
		pod:           `pod="` + escape(pod) + `"`,
	}
}

// WriteText writes the metrics of the current snapshot in the text
// exposition format, the same series and values as Collect, without the
// registry's per-sample allocations: this is what serves /metrics/cadvisor,
// where a node with a thousand containers has some 50,000 series.
func (m *CAdvisor) WriteText(w io.Writer) error {
	snap := m.c.Snapshot()
	seen := float64(snap.Time.Unix())
	cgroups := make([]cgroupLabels, 0, 1+2*len(snap.Pods))
	add := func(s *cgstats.Sample, started, created float64, container, id, image, name, namespace, pod string) {
		if s == nil {
			return
		}
		cg := labelsOf(container, id, image, name, namespace, pod)
		cg.sample, cg.started, cg.created, cg.seen = s, started, created, seen
		cgroups = append(cgroups, cg)
	}
	root := labelsOf("", "/", "", "", "", "")
	if n := snap.Node; n != nil {
		add(n, wholeSeconds(n.Created), wholeSeconds(n.Created), "", "/", "", "", "", "")
	}
	for _, p := range snap.Pods {
		if s := p.Sample; s != nil {
			add(s, wholeSeconds(s.Created), wholeSeconds(s.Created), "", p.Cgroup, "", "", p.Namespace, p.Name)
		}
		for _, c := range p.Containers {
			add(c.Sample, wholeSeconds(c.Started), wholeSeconds(c.Created), c.Name, c.Cgroup, c.Image, c.ID, p.Namespace, p.Name)
		}
	}

	bw := bufio.NewWriterSize(w, 64<<10)
	stamp := " " + strconv.FormatInt(snap.Time.UnixMilli(), 10) + "\n"
	num := make([]byte, 0, 32)
	for i, f := range textFamilies {
		if i == 0 || textFamilies[i-1].name != f.name {
			bw.WriteString("# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.kind + "\n")
		}
		for i := range cgroups {
			cg := &cgroups[i]
			v, ok := f.value(cg)
			if !ok {
				continue
			}
			bw.WriteString(f.name)
			bw.WriteByte('{')
			bw.WriteString(cg.container)
			bw.WriteString(f.mid)
			bw.WriteByte(',')
			bw.WriteString(cg.idImage)
			bw.WriteByte(',')
			bw.WriteString(cg.nameNamespace)
			bw.WriteByte(',')
			bw.WriteString(cg.pod)
			bw.WriteString(f.tail)
			bw.WriteString("} ")
			num = strconv.AppendFloat(num[:0], v, 'g', -1, 64)
			bw.Write(num)
			if f.stamped {
				bw.WriteString(stamp)
			} else {
				bw.WriteByte('\n') // the start time carries no timestamp, as in Collect
			}
		}
	}
	writeDeviceText(bw, cgroups, &root, snap.Filesystems, stamp)
	writeResctrlText(bw, snap, stamp)
	writeNetworkText(bw, snap, stamp)
	bw.WriteString("# HELP " + scrapeErrorName + " " + scrapeErrorHelp + "\n# TYPE " + scrapeErrorName + " gauge\n" + scrapeErrorName + " ")
	bw.Write(strconv.AppendFloat(num[:0], scrapeError(snap), 'g', -1, 64))
	bw.WriteByte('\n')
	bw.Write(m.hostText)
	return bw.Flush()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escape(s string) string {
	if !strings.ContainsAny(s, "\\\n\"") {
		return s
	}
	return labelEscaper.Replace(s)
}
