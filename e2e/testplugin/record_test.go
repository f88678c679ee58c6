package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	p := newForTest(t)
	require.NoError(t, p.Configure([]byte("record: "+dir+"\n"), "cfg.yaml"))
	pod := &api.PodSandbox{Name: "web", Namespace: "default"}
	ctr := &api.Container{Name: "app", Mounts: []*api.Mount{{Destination: "/sys", Type: "sysfs", Options: []string{"rw"}}}}
	_, _, err := p.CreateContainer(context.Background(), pod, ctr)
	require.NoError(t, err)

	data, err := os.ReadFile(filepath.Join(dir, "default_web_app.json"))
	require.NoError(t, err, "the container's record")
	var got api.CreateContainerRequest
	require.NoError(t, protojson.Unmarshal(data, &got))
	assert.Equal(t, "web", got.GetPod().GetName())
	assert.Equal(t, "sysfs", got.GetContainer().GetMounts()[0].GetType(), "the container as the runtime passed it")

	for _, bad := range []string{"relative", filepath.Join(dir, "missing")} {
		err := p.Configure([]byte("record: "+bad+"\n"), "cfg.yaml")
		assert.ErrorContains(t, err, `config cfg.yaml: record: "`+bad+`": expected the absolute path of an existing directory`)
	}
}
