package nriplugin

import (
	"context"
	"errors"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/common/k8s"
	"github.com/nri-suite/nri-suite/common/state"
	"github.com/nri-suite/nri-suite/common/topology/locality"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/request"
	"github.com/nri-suite/nri-suite/plugins/device-injector/internal/resolve"
)

// Synchronize brings the records in line with the running containers: it
// removes those of containers that went away while the plugin was not
// connected, resumes publishing the device health of the others, and
// rebuilds the records of containers that have none (created while the
// plugin was down) from their pods' annotations. It adjusts nothing.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	records := map[string]state.ContainerDevices{}
	if p.records != nil {
		var err error
		if records, err = p.records.List(); err != nil {
			p.recordError("list device records", err) // the good ones are still listed
		}
	}
	podByID := make(map[string]*api.PodSandbox, len(pods))
	for _, pod := range pods {
		podByID[pod.GetId()] = pod
	}
	live := make(map[string]bool, len(ctrs))
	kept, rebuilt, removed := 0, 0, 0
	for _, c := range ctrs {
		live[c.GetId()] = true
		if rec, ok := records[c.GetId()]; ok {
			p.track(k8s.Identity{ContainerID: rec.ContainerID, PodUID: rec.PodUID, Namespace: rec.Namespace,
				Pod: rec.Pod, Container: rec.Container}, rec.Devices)
			kept++
		} else if pod := podByID[c.GetPodSandboxId()]; pod != nil && p.rebuild(pod, c) {
			rebuilt++
		}
	}
	for key := range records {
		if live[key] {
			continue
		}
		if err := p.records.Remove(key); err != nil {
			p.recordError("remove stale device record", err)
		}
		removed++
	}
	if p.ctrHealth != nil {
		keys, err := p.ctrHealth.Keys()
		if err != nil {
			p.recordError("list container health records", err)
		}
		for _, key := range keys {
			if !live[key] {
				p.untrack(key)
			}
		}
	}
	p.log.WithFields(logrus.Fields{"containers": len(ctrs), "kept": kept, "rebuilt": rebuilt, "removed": removed}).
		Info("synchronized device records")
	return nil, nil
}

// rebuild restores the records of a container created while the plugin was
// not connected from what its pod's annotations ask for, and reports
// whether it asked for any device. The container runs already, so nothing
// is adjusted or refused: a device that no longer resolves, or whose node
// is gone, is recorded by name with an unknown locality, so that its health
// is still watched and published for the container.
func (p *Plugin) rebuild(pod *api.PodSandbox, ctr *api.Container) bool {
	id := k8s.IdentityOf(pod, ctr)
	log := p.log.WithFields(id.Fields())
	req, err := request.Parse(pod.GetAnnotations(), id.Container)
	if err != nil {
		log.WithError(err).Warn("no device record rebuilt: the pod's annotations cannot be read")
		return false
	}
	if len(req.CDI) == 0 && len(req.Devices) == 0 {
		return false
	}
	owner := resolve.Owner{UID: ctr.GetUser().GetUid(), GID: ctr.GetUser().GetGid()}
	var resolved []resolve.Device
	var nodes []rspec.LinuxDevice
	var unlocated []state.InjectedDevice
	var problems []error
	for _, c := range req.CDI {
		d, err := p.resolver.Resolve([]string{c.Name}, owner)
		if err != nil {
			problems = append(problems, err)
			unlocated = append(unlocated, state.InjectedDevice{Name: c.Name, Kind: state.DeviceKindCDI, NUMANode: locality.UnknownNode})
			continue
		}
		resolved = append(resolved, d...)
	}
	for _, d := range req.Devices {
		n, err := hostDevice(d)
		if err != nil {
			problems = append(problems, err)
			unlocated = append(unlocated, state.InjectedDevice{Name: d.Path, Kind: state.DeviceKindNode, Path: d.Path, NUMANode: locality.UnknownNode})
			continue
		}
		nodes = append(nodes, n)
	}
	devices := append(p.locate(resolved, nodes, id), unlocated...)
	if err := p.publish(id, devices); err != nil {
		log.WithError(err).Warn("rebuilt device record could not be published")
	}
	p.track(id, devices)
	entry := log.WithFields(logrus.Fields{"cdi": len(req.CDI), "nodes": len(req.Devices)})
	if err := errors.Join(problems...); err != nil {
		entry = entry.WithField("problems", err.Error())
	}
	entry.Info("rebuilt device record from the pod's annotations (container created while the plugin was not connected)")
	return true
}
