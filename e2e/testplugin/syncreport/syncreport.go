// Package syncreport is the file in which the test-only plugin nri-e2e-test reports
// each Synchronize, shared by the plugin that writes it and the tests that read it.
package syncreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Report is the file's content after each Synchronize.
type Report struct {
	// Synchronizations counts the Synchronize calls since the plugin process started.
	Synchronizations int `json:"synchronizations"`
	// Closed is set by the plugin's final write at a clean stop.
	Closed bool `json:"closed"`
	// Containers are those the last Synchronize delivered, sorted by namespace, pod,
	// container and id.
	Containers []Container `json:"containers"`
}

// Container is one container of a Synchronize.
type Container struct {
	ID        string `json:"id"`
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Container string `json:"container"`
	State     string `json:"state"` // api.ContainerState name, e.g. CONTAINER_RUNNING
}

// PodContainers lists "pod/container" of every reported container, in report order.
func (r Report) PodContainers() []string {
	out := make([]string, 0, len(r.Containers))
	for _, c := range r.Containers {
		out = append(out, c.Pod+"/"+c.Container)
	}
	return out
}

// Read reads the report at path; found is false when there is none yet.
func Read(path string) (r Report, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Report{}, false, nil
	}
	if err != nil {
		return Report{}, false, fmt.Errorf("reading sync report: %w", err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return Report{}, false, fmt.Errorf("decoding sync report %s: %w", path, err)
	}
	return r, true, nil
}

// Write replaces the report at path atomically, so that readers never see half of it.
func Write(path string, r Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding sync report: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing sync report %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing sync report %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing sync report %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing sync report %s: %w", path, err)
	}
	return nil
}
