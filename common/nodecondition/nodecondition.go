// Package nodecondition keeps one condition of the node's status in the API
// server up to date with what a plugin knows, off the plugin's own paths:
// Set only records the wanted condition, and one goroutine (Run) writes the
// latest one, retrying while the API server is away. Only the latest
// matters, so conditions set in between are never written.
//
// The write is a strategic merge patch of nodes/status, which merges
// conditions by type and so leaves the kubelet's and other writers' alone.
// The node is read first (nodes get) to keep lastTransitionTime when only
// the message changed.
package nodecondition

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// DefaultBackoff spaces the attempts while the API server is away: from
// half a second up to 30 s, for as long as it takes.
var DefaultBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}

// Condition is what the node's condition should say.
type Condition struct {
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

// Setter keeps condition Type of node Node.
type Setter struct {
	client  kubernetes.Interface
	node    string
	typ     corev1.NodeConditionType
	backoff wait.Backoff
	log     *logrus.Entry
	wake    chan struct{}

	mu     sync.Mutex
	wanted *Condition // nil: nothing to write
}

// New builds a Setter of condition typ on node; it writes once Run runs.
func New(client kubernetes.Interface, node string, typ corev1.NodeConditionType, log *logrus.Entry) *Setter {
	return &Setter{client: client, node: node, typ: typ, backoff: DefaultBackoff, log: log.WithField("condition", typ),
		wake: make(chan struct{}, 1)}
}

// Set makes c the condition to write; it never waits. A nil Setter (no
// access to the API server) does nothing.
func (s *Setter) Set(c Condition) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.wanted = &c
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run writes the latest condition set until ctx ends.
func (s *Setter) Run(ctx context.Context) {
	var written *Condition
	backoff := s.backoff
	for {
		s.mu.Lock()
		wanted := s.wanted
		s.mu.Unlock()
		if wanted == nil || (written != nil && *wanted == *written) {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		if err := s.write(ctx, *wanted); err != nil {
			s.log.WithError(err).Warn("cannot set the node's condition yet; retrying")
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff.Step()):
			}
			continue
		}
		s.log.WithFields(logrus.Fields{"status": wanted.Status, "message": wanted.Message}).Info("set the node's condition")
		written, backoff = wanted, s.backoff
	}
}

// Remove deletes the condition from the node's status (a strategic merge
// patch's delete directive), for a plugin leaving the node for good, so
// that no condition stays that nobody keeps any longer. The caller bounds
// it with ctx; Run must have stopped.
func (s *Setter) Remove(ctx context.Context) error {
	if s == nil {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{
		{"type": s.typ, "$patch": "delete"}}}})
	if err != nil {
		return err
	}
	if _, err := s.client.CoreV1().Nodes().PatchStatus(ctx, s.node, patch); err != nil {
		return fmt.Errorf("removing condition %s from node %s: %w", s.typ, s.node, err)
	}
	return nil
}

// write patches the node's status with c.
func (s *Setter) write(ctx context.Context, c Condition) error {
	node, err := s.client.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", s.node, err)
	}
	now := metav1.Now()
	condition := corev1.NodeCondition{Type: s.typ, Status: c.Status, Reason: c.Reason, Message: c.Message,
		LastHeartbeatTime: now, LastTransitionTime: now}
	for _, old := range node.Status.Conditions {
		if old.Type == s.typ && old.Status == c.Status {
			condition.LastTransitionTime = old.LastTransitionTime
		}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{condition}}})
	if err != nil {
		return err
	}
	if _, err := s.client.CoreV1().Nodes().PatchStatus(ctx, s.node, patch); err != nil {
		return fmt.Errorf("patching the status of node %s: %w", s.node, err)
	}
	return nil
}
