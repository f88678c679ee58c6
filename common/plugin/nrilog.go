package plugin

import (
	"context"

	"github.com/sirupsen/logrus"
)

// stubLogger routes the NRI stub's messages into the runner's logger. The stub narrates
// every step of a registration at info level; the runner logs one line per connection
// itself, so the stub's info lines go to debug.
type stubLogger struct {
	log *logrus.Entry
}

func (l stubLogger) Debugf(_ context.Context, format string, args ...any) {
	l.log.Debugf(format, args...)
}

func (l stubLogger) Infof(_ context.Context, format string, args ...any) {
	l.log.Debugf(format, args...)
}

func (l stubLogger) Warnf(_ context.Context, format string, args ...any) {
	l.log.Warnf(format, args...)
}

func (l stubLogger) Errorf(_ context.Context, format string, args ...any) {
	l.log.Errorf(format, args...)
}
