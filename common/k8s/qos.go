package k8s

import (
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// QOSClass is a pod's Kubernetes quality of service class.
type QOSClass string

// The three classes the kubelet knows, spelled as in the Pod status.
const (
	QOSGuaranteed QOSClass = "Guaranteed"
	QOSBurstable  QOSClass = "Burstable"
	QOSBestEffort QOSClass = "BestEffort"
)

// QOSSource says where a QoS class was read, so that a log line can tell a
// certain class from an estimate.
type QOSSource string

const (
	// QOSFromCgroupParent: the pod sandbox's cgroup parent, which the kubelet
	// names after the class. Authoritative.
	QOSFromCgroupParent QOSSource = "cgroup-parent"
	// QOSFromCgroupsPath: the container's cgroups path, which the runtime
	// derives from the same parent. Authoritative.
	QOSFromCgroupsPath QOSSource = "cgroups-path"
	// QOSFromResources: inferred from the container's own resources; see
	// Resources.QOSClass for what that cannot know.
	QOSFromResources QOSSource = "resources"
)

// QOSClassOf returns the QoS class of the container's pod and where it came
// from: the pod's cgroup parent, else the container's cgroups path, else an
// inference from the container's resources (the kubelet runs with
// --cgroups-per-qos=false, or the pod was not made by a kubelet).
// Both arguments may be nil.
func QOSClassOf(pod *api.PodSandbox, ctr *api.Container) (QOSClass, QOSSource) {
	if pc, ok := ParsePodCgroup(pod.GetLinux().GetCgroupParent()); ok {
		return pc.QOS, QOSFromCgroupParent
	}
	if pc, ok := ParsePodCgroup(ctr.GetLinux().GetCgroupsPath()); ok {
		return pc.QOS, QOSFromCgroupsPath
	}
	return EstimateResources(ctr.GetLinux().GetResources()).QOSClass(), QOSFromResources
}

// PodCgroup is what a kubelet-made cgroup path tells about its pod.
type PodCgroup struct {
	QOS QOSClass
	// PodUID is the pod's uid with its dashes restored, or empty when the
	// path stops at the QoS level (/kubepods/burstable).
	PodUID string
}

// ParsePodCgroup reads the QoS class (and the pod uid when present) from a
// pod cgroup parent or a container cgroups path as the kubelet and the
// runtimes name them:
//
//	cgroupfs:  [/root]/kubepods/pod<uid>             Guaranteed
//	           [/root]/kubepods/burstable/pod<uid>   Burstable
//	           [/root]/kubepods/besteffort/pod<uid>  BestEffort
//	           followed by /<id> (containerd) or /crio-<id> (CRI-O) for a container
//	systemd:   /kubepods.slice/kubepods-pod<uid_>.slice
//	           /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice
//	           /kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice
//	           kubepods-burstable-pod<uid_>.slice:cri-containerd:<id> or :crio:<id> for a container
//
// where <uid_> is the uid with '-' escaped to '_'. The deepest segment that
// names a class wins. ok is false when the path names none (no kubepods).
func ParsePodCgroup(path string) (pc PodCgroup, ok bool) {
	// ':' separates the systemd driver's "slice:prefix:name" container form.
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == ':' })
	for i := range segs {
		if found, matched := parseSegment(segs, i); matched {
			pc, ok = found, true
		}
	}
	return pc, ok
}

// parseSegment reads segs[i]: a whole systemd slice name, or the cgroupfs
// "kubepods" with the segments after it, which carry the class and the uid.
func parseSegment(segs []string, i int) (PodCgroup, bool) {
	if segs[i] == "kubepods" {
		return parseCgroupfsTier(segs[i+1:])
	}
	return parseSystemdSlice(segs[i])
}

// tierClasses are the QoS levels that have their own cgroup below kubepods;
// Guaranteed pods sit directly in kubepods.
var tierClasses = map[string]QOSClass{
	"burstable":  QOSBurstable,
	"besteffort": QOSBestEffort,
}

// parseCgroupfsTier reads the segments that follow "kubepods" in a cgroupfs
// path: [burstable|besteffort/]pod<uid>.
func parseCgroupfsTier(rest []string) (PodCgroup, bool) {
	if len(rest) == 0 {
		return PodCgroup{}, false
	}
	if class, ok := tierClasses[rest[0]]; ok {
		pc := PodCgroup{QOS: class}
		if len(rest) > 1 {
			pc.PodUID, _ = podUID(rest[1], "pod")
		}
		return pc, true
	}
	if uid, ok := podUID(rest[0], "pod"); ok {
		return PodCgroup{QOS: QOSGuaranteed, PodUID: uid}, true
	}
	return PodCgroup{}, false
}

// parseSystemdSlice reads one systemd slice name: kubepods-<tier>.slice,
// kubepods-<tier>-pod<uid_>.slice or kubepods-pod<uid_>.slice.
func parseSystemdSlice(seg string) (PodCgroup, bool) {
	name, ok := strings.CutSuffix(seg, ".slice")
	if !ok {
		return PodCgroup{}, false
	}
	rest, ok := strings.CutPrefix(name, "kubepods-")
	if !ok {
		return PodCgroup{}, false
	}
	for tier, class := range tierClasses {
		if rest == tier {
			return PodCgroup{QOS: class}, true
		}
		if uid, ok := systemdPodUID(rest, tier+"-pod"); ok {
			return PodCgroup{QOS: class, PodUID: uid}, true
		}
	}
	if uid, ok := systemdPodUID(rest, "pod"); ok {
		return PodCgroup{QOS: QOSGuaranteed, PodUID: uid}, true
	}
	return PodCgroup{}, false
}

// systemdPodUID unescapes the uid after prefix. An escaped uid has no '-':
// in a slice name that separates levels of the hierarchy.
func systemdPodUID(rest, prefix string) (string, bool) {
	uid, ok := podUID(rest, prefix)
	if !ok || strings.Contains(uid, "-") {
		return "", false
	}
	return strings.ReplaceAll(uid, "_", "-"), true
}

// podUID returns what follows prefix in seg, if that is not empty.
func podUID(seg, prefix string) (string, bool) {
	uid, ok := strings.CutPrefix(seg, prefix)
	return uid, ok && uid != ""
}
