package nriplugin

import (
	"errors"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nri-suite/nri-suite/plugins/stats/internal/server"
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

// serve starts the listener: at once if it can (so that it listens before
// the plugin connects), else again every retryInterval in the background.
func serve(start func() (*server.Server, error), notReady func(string), log *logrus.Entry) *listener {
	l := &listener{start: start, notReady: notReady, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	if why := l.try(""); why == "" {
		close(l.done)
	} else {
		go l.retry(why)
	}
	return l
}

// try starts the listener and returns "", or why it could not; last is the
// previous reason, which is not logged again.
func (l *listener) try(last string) string {
	s, err := l.start()
	if err != nil {
		why := "stats endpoints: " + err.Error()
		if why != last {
			l.notReady(why)
			l.log.WithError(err).Errorf("cannot serve the stats endpoints: not ready, trying again every %s", retryInterval)
		}
		return why
	}
	l.mu.Lock()
	l.server = s
	l.mu.Unlock()
	return ""
}

func (l *listener) retry(last string) {
	defer close(l.done)
	for last != "" {
		select {
		case <-l.stop:
			return
		case <-time.After(retryInterval):
		}
		last = l.try(last)
	}
	l.notReady("")
	l.log.Info("the stats endpoints serve: ready again")
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
