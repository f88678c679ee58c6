package plugin

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"k8s.io/klog/v2"
)

// What the Kubernetes libraries log reaches the plugin's logger, in its
// format, with their key-value pairs as fields.
func TestRouteKlog(t *testing.T) {
	var out bytes.Buffer
	log := logrus.New()
	log.SetOutput(&out)
	log.SetFormatter(&logrus.JSONFormatter{})
	routeKlog(logrus.NewEntry(log))
	defer klog.ClearLogger()

	klog.InfoS("Loaded a new cert/key pair", "name", "stats-serving")
	klog.V(2).InfoS("hidden at info level")
	klog.ErrorS(errors.New("boom"), "Failed to watch cert and key file")
	klog.Flush()
	assert.Contains(t, out.String(), `"component":"kubernetes","level":"info","msg":"Loaded a new cert/key pair","name":"stats-serving"`)
	assert.Contains(t, out.String(), `"error":"boom","level":"error","msg":"Failed to watch cert and key file"`)
	assert.NotContains(t, out.String(), "hidden")
}
