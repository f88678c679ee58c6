package plugin

import (
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// routeKlog sends what the Kubernetes libraries log through klog (client-go,
// k8s.io/apiserver's certificate reloaders and webhooks) to the plugin's
// logger, so that its log stays in one format: their info lines at info,
// their errors at error, and what they log at a verbosity above 0 (only
// through a logr.Logger: klog's own -v stays 0) at debug.
func routeKlog(log *logrus.Entry) {
	klog.SetLogger(logr.New(&klogSink{log: log.WithField("component", "kubernetes")}))
}

// klogSink is a logr.LogSink writing to logrus.
type klogSink struct {
	log  *logrus.Entry
	name string
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(level int) bool {
	if level > 0 {
		return s.log.Logger.IsLevelEnabled(logrus.DebugLevel)
	}
	return s.log.Logger.IsLevelEnabled(logrus.InfoLevel)
}

func (s *klogSink) Info(level int, msg string, kv ...any) {
	entry := s.entry(kv)
	if level > 0 {
		entry.Debug(msg)
		return
	}
	entry.Info(msg)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	entry := s.entry(kv)
	if err != nil {
		entry = entry.WithError(err)
	}
	entry.Error(msg)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{log: s.entry(kv), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &klogSink{log: s.log.WithField("logger", name), name: name}
}

// entry adds the key-value pairs; a key that is not a string is shown as
// the library passed it.
func (s *klogSink) entry(kv []any) *logrus.Entry {
	fields := logrus.Fields{}
	for i := 0; i+1 < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = "key"
		}
		fields[key] = kv[i+1]
	}
	return s.log.WithFields(fields)
}
