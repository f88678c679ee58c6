package nriplugin

import (
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/plugins/stats/server"
)

// retryInterval is how often a stats listener that could not start is
// tried again: a mounted Secret changes within a minute of its edit.
const retryInterval = time.Second

// listener keeps the stats endpoints served. A start that fails (a TLS
// file missing or broken, the address still in use) holds the plugin not
// ready, saying why, and is tried again until it works: a DaemonSet's pod
// then shows why in its events and recovers without a restart, as for a
// bad --config.
type listener struct {
	start    func() (*server.Server, error)
	notReady func(why string)
	log      *logrus.Entry

	mu     sync.Mutex
	server *server.Server
	stop   chan struct{}
	done   chan struct{}
}

// serve starts the listener, at once if it can, else in the background.
func serve(start func() (*server.Server, error), notReady func(string), log *logrus.Entry) *listener {
	l := &listener{start: start, notReady: notReady, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *listener) run() {
	defer close(l.done)
	var last string
	for {
		s, err := l.start()
		if err == nil {
			l.mu.Lock()
			l.server = s
			l.mu.Unlock()
			if last != "" {
				l.notReady("")
				l.log.Info("the stats endpoints serve: ready again")
			}
			return
		}
		if why := "stats endpoints: " + err.Error(); why != last {
			l.notReady(why)
			l.log.WithError(err).Errorf("cannot serve the stats endpoints: not ready, trying again every %s", retryInterval)
			last = why
		}
		select {
		case <-l.stop:
			return
		case <-time.After(retryInterval):
		}
	}
}

// Close stops trying and stops serving.
func (l *listener) Close() error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.server == nil {
		return nil
	}
	return errors.Join(l.server.Close())
}
