package validator

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/nri-suite/nri-suite/plugins/security/config"
)

// The routes to the host besides mounts (mounts.go): device-cgroup rules,
// the cgroups path, the OOM score adjustment, the environment and rlimits.

func (v *Validator) deviceCgroups(req *api.ValidateContainerAdjustmentRequest) []Finding {
	var items []string
	for _, d := range req.GetAdjust().GetLinux().GetResources().GetDevices() {
		if !d.GetAllow() {
			continue // a deny rule only takes away
		}
		if rule := deviceRule(d); !v.cfg.DeviceCgroups.Allows(rule) {
			items = append(items, rule.String())
		}
	}
	if len(items) == 0 {
		return nil
	}
	slices.Sort(items)
	return []Finding{{Rule: config.RuleDeviceCgroups, Unattributed: true, Items: slices.Compact(items),
		Problem: "added device-cgroup rules outside validator.device-cgroups.allowed " +
			"(NRI records no owner of device-cgroup rules: which plugin added them cannot be named)"}}
}

// deviceRule reads an OCI device-cgroup rule the way the runtime applies it:
// no type, major or minor means any, no access means all of rwm.
func deviceRule(d *api.LinuxDeviceCgroup) config.DeviceRule {
	num := func(n *api.OptionalInt64) int64 {
		if n == nil || n.GetValue() < 0 {
			return -1
		}
		return n.GetValue()
	}
	return config.DeviceRule{Type: cmp.Or(d.GetType(), "a"), Major: num(d.GetMajor()), Minor: num(d.GetMinor()),
		Access: cmp.Or(d.GetAccess(), "rwm")}
}

func (v *Validator) cgroupsPath(req *api.ValidateContainerAdjustmentRequest) []Finding {
	p := req.GetAdjust().GetLinux().GetCgroupsPath()
	if p == "" {
		return nil
	}
	parent := req.GetPod().GetLinux().GetCgroupParent()
	if belowCgroup(p, parent) {
		return nil
	}
	owner, _ := req.GetOwners().CgroupsPathOwner(req.GetContainer().GetId())
	return []Finding{{Rule: config.RuleCgroupsPath, Plugin: owner,
		Items:   []string{fmt.Sprintf("%s (the pod's cgroup: %s)", p, cmp.Or(parent, "none"))},
		Problem: "moved the container out of its pod's cgroup, and so out of the pod's limits"}}
}

// belowCgroup reports whether the cgroups path p puts the container below
// the pod's cgroup parent, in either form the runtimes use: a cgroupfs path
// (/kubepods/burstable/pod<uid>/<id>), or systemd's slice:prefix:name
// (kubepods-burstable-pod<uid>.slice:cri-containerd:<id>), whose slice must
// be the pod's (the parent's last element) or one nested in it.
func belowCgroup(p, parent string) bool {
	if parent == "" {
		return false
	}
	if parts := strings.Split(p, ":"); len(parts) == 3 {
		slice, podSlice := parts[0], path.Base(parent)
		nested := strings.HasPrefix(slice, strings.TrimSuffix(podSlice, ".slice")+"-") && strings.HasSuffix(slice, ".slice")
		return strings.HasSuffix(podSlice, ".slice") && (slice == podSlice || nested) && parts[2] != "" && !strings.Contains(p, "/")
	}
	p, parent = path.Clean(p), path.Clean(parent)
	return path.IsAbs(p) && path.IsAbs(parent) && p != parent && strings.HasPrefix(p, strings.TrimSuffix(parent, "/")+"/")
}

func (v *Validator) oomScoreAdj(req *api.ValidateContainerAdjustmentRequest) []Finding {
	adjusted := req.GetAdjust().GetLinux().GetOomScoreAdj()
	if adjusted == nil {
		return nil
	}
	// Without a value of the kubelet's, which gives a negative one only to
	// Guaranteed and critical pods, the container is an ordinary one.
	had, from := int64(0), "none, counted as 0"
	if o := req.GetContainer().GetLinux().GetOomScoreAdj(); o != nil {
		had, from = o.GetValue(), fmt.Sprint(o.GetValue())
	}
	if adjusted.GetValue() >= had {
		return nil
	}
	owner, _ := req.GetOwners().OomScoreAdjOwner(req.GetContainer().GetId())
	return []Finding{{Rule: config.RuleOOMScoreAdj, Plugin: owner,
		Items:   []string{fmt.Sprintf("%d (the container had %s)", adjusted.GetValue(), from)},
		Problem: "lowered the container's OOM score adjustment, so that the OOM killer takes other processes first"}}
}

func (v *Validator) env(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleEnv, func(owner string) string {
		return fmt.Sprintf("set environment variables that make the loader or the C library load code, "+
			"denied by validator.env (and not allowed by plugins.%s)", owner)
	})
	for _, e := range req.GetAdjust().GetEnv() {
		name, removed := e.IsMarkedForRemoval()
		if removed {
			continue
		}
		owner, _ := req.GetOwners().EnvOwner(id, name)
		if !v.cfg.Env.Allows(idOf(owner), name) {
			c.add(owner, name) // not the value: it may be a secret
		}
	}
	return c.findings()
}

func (v *Validator) rlimits(req *api.ValidateContainerAdjustmentRequest) []Finding {
	id := req.GetContainer().GetId()
	c := newCollector(config.RuleRlimits, func(string) string {
		return "raised rlimits above validator.rlimits.max, or above what the container had for types without a maximum"
	})
	for _, l := range req.GetAdjust().GetRlimits() {
		owner, _ := req.GetOwners().RlimitOwner(id, l.GetType())
		set := fmt.Sprintf("%s soft %d hard %d", l.GetType(), l.GetSoft(), l.GetHard())
		if ceiling, ok := v.cfg.Rlimits.Ceiling(l.GetType()); ok {
			if max(l.GetSoft(), l.GetHard()) > ceiling {
				c.add(owner, fmt.Sprintf("%s (maximum %d)", set, ceiling))
			}
			continue
		}
		i := slices.IndexFunc(req.GetContainer().GetRlimits(), func(o *api.POSIXRlimit) bool { return o.GetType() == l.GetType() })
		if i < 0 {
			c.add(owner, set+" (no maximum, and the container had none)")
			continue
		}
		if had := req.GetContainer().GetRlimits()[i]; l.GetSoft() > had.GetSoft() || l.GetHard() > had.GetHard() {
			c.add(owner, fmt.Sprintf("%s (no maximum, and the container had soft %d hard %d)", set, had.GetSoft(), had.GetHard()))
		}
	}
	return c.findings()
}
