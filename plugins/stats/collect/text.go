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

// family is one metric family of the text output: a series of
// cadvisorSeries, or the start time (series nil).
type family struct {
	name, help, kind string
	series           *series
}

// textFamilies are the cAdvisor families in name order, as a registry
// would write them.
var textFamilies = func() []family {
	fams := []family{{name: "container_start_time_seconds", help: "Start time of the container since unix epoch in seconds.", kind: "gauge"}}
	for i := range cadvisorSeries {
		s := &cadvisorSeries[i]
		kind := "gauge"
		if s.kind == prometheus.CounterValue {
			kind = "counter"
		}
		fams = append(fams, family{name: s.name, help: s.help, kind: kind, series: s})
	}
	sort.Slice(fams, func(i, j int) bool { return fams[i].name < fams[j].name })
	return fams
}()

// cgroupLabels are one cgroup's label pairs, split where the cpu label of
// the CPU usage goes (labels are written in name order).
type cgroupLabels struct {
	head, tail string // `container="..."` and `id="...",image=...,pod="..."`
	sample     *cgstats.Sample
	started    float64 // 0: unknown
}

// WriteText writes the metrics of the current snapshot in the text
// exposition format, the same series and values as Collect, without the
// registry's per-sample allocations: this is what serves /metrics/cadvisor,
// where a node with a thousand containers has some 50,000 series.
func (m *CAdvisor) WriteText(w io.Writer) error {
	snap := m.c.Snapshot()
	cgroups := make([]cgroupLabels, 0, 1+2*len(snap.Pods))
	add := func(s *cgstats.Sample, started float64, container, id, image, name, namespace, pod string) {
		if s == nil {
			return
		}
		cgroups = append(cgroups, cgroupLabels{
			head: `container="` + escape(container) + `"`,
			tail: `id="` + escape(id) + `",image="` + escape(image) + `",name="` + escape(name) +
				`",namespace="` + escape(namespace) + `",pod="` + escape(pod) + `"`,
			sample: s, started: started,
		})
	}
	add(snap.Node, 0, "", "/", "", "", "", "")
	for _, p := range snap.Pods {
		add(p.Sample, 0, "", p.Cgroup, "", "", p.Namespace, p.Name)
		for _, c := range p.Containers {
			started := 0.0
			if !c.Started.IsZero() {
				started = float64(c.Started.UnixNano()) / 1e9
			}
			add(c.Sample, started, c.Name, c.Cgroup, c.Image, c.ID, p.Namespace, p.Name)
		}
	}

	bw := bufio.NewWriterSize(w, 64<<10)
	stamp := " " + strconv.FormatInt(snap.Time.UnixMilli(), 10) + "\n"
	num := make([]byte, 0, 32)
	for _, f := range textFamilies {
		bw.WriteString("# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " " + f.kind + "\n")
		for i := range cgroups {
			cg := &cgroups[i]
			var v float64
			ok := false
			if f.series == nil {
				v, ok = cg.started, cg.started != 0
			} else {
				v, ok = f.series.value(cg.sample)
			}
			if !ok {
				continue
			}
			bw.WriteString(f.name)
			bw.WriteByte('{')
			bw.WriteString(cg.head)
			if f.series != nil && f.series.cpu {
				bw.WriteString(`,cpu="total"`)
			}
			bw.WriteByte(',')
			bw.WriteString(cg.tail)
			bw.WriteString("} ")
			num = strconv.AppendFloat(num[:0], v, 'g', -1, 64)
			bw.Write(num)
			if f.series == nil {
				bw.WriteByte('\n') // the start time carries no timestamp, as in Collect
			} else {
				bw.WriteString(stamp)
			}
		}
	}
	writeResctrlText(bw, snap, stamp)
	return bw.Flush()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escape(s string) string {
	if !strings.ContainsAny(s, "\\\n\"") {
		return s
	}
	return labelEscaper.Replace(s)
}
