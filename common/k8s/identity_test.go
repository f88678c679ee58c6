package k8s

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
)

// kubeletPodLabels and kubeletContainerLabels are what the kubelet sets on
// the CRI pod sandbox and container configs.
func kubeletPodLabels(ns, pod, uid string) map[string]string {
	return map[string]string{LabelPodNamespace: ns, LabelPodName: pod, LabelPodUID: uid, "app": "web"}
}

func kubeletContainerLabels(ns, pod, uid, ctr string) map[string]string {
	labels := kubeletPodLabels(ns, pod, uid)
	delete(labels, "app")
	labels[LabelContainerName] = ctr
	return labels
}

func TestIdentityOf(t *testing.T) {
	tests := []struct {
		name string
		pod  *api.PodSandbox
		ctr  *api.Container
		want Identity
	}{
		{
			name: "containerd: labels and metadata agree",
			pod:  &api.PodSandbox{Id: "sb1", Name: "web-0", Namespace: "shop", Uid: testUID, Labels: kubeletPodLabels("shop", "web-0", testUID)},
			ctr:  &api.Container{Id: "c1", PodSandboxId: "sb1", Name: "nginx", Labels: kubeletContainerLabels("shop", "web-0", testUID, "nginx")},
			want: Identity{Namespace: "shop", Pod: "web-0", PodUID: testUID, Container: "nginx", PodSandboxID: "sb1", ContainerID: "c1"},
		},
		{
			name: "labels win over NRI fields that differ",
			pod:  &api.PodSandbox{Id: "sb1", Name: "k8s_web-0_shop_uid_0", Namespace: "other", Uid: "other-uid", Labels: kubeletPodLabels("shop", "web-0", testUID)},
			ctr:  &api.Container{Id: "c1", Name: "k8s_nginx_web-0", Labels: kubeletContainerLabels("shop", "web-0", testUID, "nginx")},
			want: Identity{Namespace: "shop", Pod: "web-0", PodUID: testUID, Container: "nginx", PodSandboxID: "sb1", ContainerID: "c1"},
		},
		{
			name: "CRI-O: the container name comes from the label, pod labels missing",
			pod:  &api.PodSandbox{Id: "sb2", Name: "web-0", Namespace: "shop", Uid: testUID},
			ctr:  &api.Container{Id: "c2", Name: "nginx", Labels: kubeletContainerLabels("shop", "web-0", testUID, "nginx")},
			want: Identity{Namespace: "shop", Pod: "web-0", PodUID: testUID, Container: "nginx", PodSandboxID: "sb2", ContainerID: "c2"},
		},
		{
			name: "container labels fill in for missing pod labels",
			pod:  &api.PodSandbox{Id: "sb3"},
			ctr:  &api.Container{Id: "c3", Labels: kubeletContainerLabels("shop", "web-0", testUID, "nginx")},
			want: Identity{Namespace: "shop", Pod: "web-0", PodUID: testUID, Container: "nginx", PodSandboxID: "sb3", ContainerID: "c3"},
		},
		{
			name: "crictl without labels: NRI fields",
			pod:  &api.PodSandbox{Id: "sb4", Name: "busybox", Namespace: "default", Uid: "u-1"},
			ctr:  &api.Container{Id: "c4", Name: "sh"},
			want: Identity{Namespace: "default", Pod: "busybox", PodUID: "u-1", Container: "sh", PodSandboxID: "sb4", ContainerID: "c4"},
		},
		{
			name: "empty label values are ignored",
			pod:  &api.PodSandbox{Name: "busybox", Labels: map[string]string{LabelPodName: ""}},
			ctr:  &api.Container{Name: "sh", Labels: map[string]string{LabelContainerName: ""}},
			want: Identity{Pod: "busybox", Container: "sh"},
		},
		{
			name: "nil pod and container",
			want: Identity{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IdentityOf(tt.pod, tt.ctr))
		})
	}
}

func TestIdentityStringAndFields(t *testing.T) {
	id := Identity{Namespace: "shop", Pod: "web-0", PodUID: testUID, Container: "nginx", ContainerID: "c1"}
	assert.Equal(t, "shop/web-0/nginx", id.String())
	assert.Equal(t, logrus.Fields{"pod": "web-0", "namespace": "shop", "container": "nginx"}, id.Fields())
}
