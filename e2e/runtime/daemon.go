package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"
)

// criDaemon is the part every Runtime shares: one daemon that the sandbox
// starts, kills and starts again with the same command, and that is up once
// its CRI endpoint reports RuntimeReady. A runtime embeds it and only says
// its command (launch), which gives it PID, Restart and Stop.
type criDaemon struct {
	cmd      command
	crictl   string // the cache's crictl, to ask the endpoint
	endpoint string
	log      logrus.FieldLogger
	process  *process
}

// launch starts the daemon with cmd and waits until its CRI answers.
func (d *criDaemon) launch(ctx context.Context, cmd command, crictl, endpoint string, log logrus.FieldLogger) error {
	d.cmd, d.crictl, d.endpoint, d.log = cmd, crictl, endpoint, log
	return d.start(ctx)
}

func (d *criDaemon) start(ctx context.Context) error {
	p, err := startProcess(d.cmd)
	if err != nil {
		return err
	}
	d.process = p
	d.log.WithField("pid", p.PID()).Info(d.cmd.name + " started")
	return p.waitFor(ctx, d.cmd.name+"'s CRI", func(ctx context.Context) error {
		return criReady(ctx, d.crictl, d.endpoint)
	})
}

// PID implements Runtime.
func (d *criDaemon) PID() int {
	if d.process == nil || d.process.exited() {
		return 0
	}
	return d.process.PID()
}

// Restart implements Runtime: the containers stay in their shims (conmon
// for CRI-O) while the daemon is down, and it finds them again at start.
func (d *criDaemon) Restart(ctx context.Context) error {
	if d.process == nil {
		return errors.New("the runtime was not started")
	}
	d.process.kill()
	d.log.WithField("pid", d.process.PID()).Info(d.cmd.name + " killed")
	return d.start(ctx)
}

// Stop implements Runtime.
func (d *criDaemon) Stop(_ context.Context, grace time.Duration) error {
	if d.process != nil {
		d.process.stop(grace)
	}
	return nil
}
