package collect

import (
	"errors"
	"fmt"
	"sort"

	"github.com/nri-suite/nri-suite/common/state"
)

// SuiteState is what the suite's other plugins published in the shared
// state directory, as of one snapshot.
type SuiteState struct {
	// Placements are topology-aware's placements by container id, with the
	// shared pool's cpusets resolved.
	Placements map[string]state.PlacementRecord
	// Health is device-injector's device health by container id (KEP-4680).
	Health map[string]state.ContainerHealth
	// Plugins are the runners' status records, by NRI index and name.
	Plugins []state.PluginStatus
}

// suiteReader reads the records other plugins publish.
type suiteReader struct {
	placements *state.Records[state.PlacementRecord]
	pools      *state.Records[state.PoolRecord]
	health     *state.Records[state.ContainerHealth]
	plugins    *state.Records[state.PluginStatus]
}

func newSuiteReader(dir string) (*suiteReader, error) {
	var r suiteReader
	var err error
	if r.placements, err = state.PlacementRecords(dir); err != nil {
		return nil, err
	}
	if r.pools, err = state.PoolRecords(dir); err != nil {
		return nil, err
	}
	if r.health, err = state.ContainerHealthRecords(dir); err != nil {
		return nil, err
	}
	if r.plugins, err = state.PluginStatuses(dir); err != nil {
		return nil, err
	}
	return &r, nil
}

// read returns the good records and one error per bad one.
func (r *suiteReader) read() (SuiteState, []error) {
	var s SuiteState
	var errs []error
	collect := func(err error) {
		if err == nil {
			return
		}
		// List joins one *CorruptError per bad record: count each.
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, joined.Unwrap()...)
			return
		}
		errs = append(errs, err)
	}

	placements, err := r.placements.List()
	collect(err)
	pools, err := r.pools.List() // after the placements: see PlacementRecord.Resolve
	collect(err)
	s.Placements = make(map[string]state.PlacementRecord, len(placements))
	for _, p := range placements {
		cpus, mems, err := p.Resolve(pools)
		if err != nil {
			collect(err)
			continue
		}
		p.CPUs, p.Mems = cpus, mems
		s.Placements[p.ContainerID] = p
	}

	health, err := r.health.List()
	collect(err)
	s.Health = make(map[string]state.ContainerHealth, len(health))
	for _, h := range health {
		s.Health[h.ContainerID] = h
	}

	plugins, err := r.plugins.List()
	collect(err)
	for _, p := range plugins {
		s.Plugins = append(s.Plugins, p)
	}
	sort.Slice(s.Plugins, func(i, j int) bool { return s.Plugins[i].Key() < s.Plugins[j].Key() })
	for i, err := range errs {
		if !errors.Is(err, state.ErrCorrupt) {
			errs[i] = fmt.Errorf("reading the shared state: %w", err)
		}
	}
	return s, errs
}
