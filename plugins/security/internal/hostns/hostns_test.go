package hostns

import (
	"errors"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/assert"
)

type fakeHost struct{}

func (fakeHost) IsHost(nsType, path string) (bool, error) {
	if path == "/gone" {
		return false, errors.New("no such file")
	}
	return path == "/host/"+nsType, nil
}

func TestOf(t *testing.T) {
	types := []string{"network", "pid", "ipc"}
	list := []*api.LinuxNamespace{{Type: "mount"}, {Type: "network", Path: "/host/network"}, {Type: "ipc", Path: "/proc/9/ns/ipc"}}
	got := Of(list, types, fakeHost{})
	assert.Equal(t, []Shared{{Type: "network", Why: "joins the host's at /host/network"}, {Type: "pid", Why: "no namespace of its own"}}, got)

	got = Of([]*api.LinuxNamespace{{Type: "mount"}, {Type: "network", Path: "/gone"}, {Type: "pid"}, {Type: "ipc"}}, types, fakeHost{})
	assert.Len(t, got, 1)
	assert.Equal(t, "network (cannot tell whether /gone is the host's: no such file)", got[0].String())
	assert.Error(t, got[0].Err)

	got = Of(nil, types, fakeHost{})
	assert.Len(t, got, 3, "no namespaces at all: cannot tell, for each type")
	assert.ErrorIs(t, got[0].Err, errNoNamespaces)
}
