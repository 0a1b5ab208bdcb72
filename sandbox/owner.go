package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

// Labels every pybox container carries.
const (
	LabelManaged = "pybox.managed" // always "true"
	LabelOwner   = "pybox.owner"   // the instance that created it
	LabelHost    = "pybox.host"    // hostname of that instance
	LabelPID     = "pybox.pid"     // its process id
	LabelRole    = "pybox.role"    // run, session, install
)

// Owner identifies this server instance on a shared daemon.
type Owner struct {
	ID   string
	Host string
	PID  int
	seq  *atomic.Int64
}

// NewOwner returns a fresh identity for this process.
func NewOwner() Owner {
	b := make([]byte, 6)
	_, _ = rand.Read(b)      // crypto/rand.Read never fails on Linux (documented)
	host, _ := os.Hostname() // an empty host only makes reaping more cautious
	return Owner{ID: hex.EncodeToString(b), Host: host, PID: os.Getpid(), seq: new(atomic.Int64)}
}

// Labels are the labels of a container with role created by this instance.
func (o Owner) Labels(role string) map[string]string {
	return map[string]string{
		LabelManaged: "true", LabelOwner: o.ID, LabelHost: o.Host,
		LabelPID: strconv.Itoa(o.PID), LabelRole: role,
	}
}

// ContainerName is unique per instance: pybox-<role>-<owner>-<n>.
func (o Owner) ContainerName(role string) string {
	return fmt.Sprintf("pybox-%s-%s-%d", role, o.ID, o.seq.Add(1))
}

// orphaned reports whether a container's labels name an owner that is
// certainly gone: same host, and its process no longer runs (or runs as a
// different instance, i.e. the pid was reused by this very process).
func (o Owner) orphaned(labels map[string]string) bool {
	if labels[LabelOwner] == o.ID || labels[LabelHost] != o.Host || o.Host == "" {
		return false
	}
	pid, err := strconv.Atoi(labels[LabelPID])
	if err != nil || pid <= 0 {
		return true
	}
	return pid == o.PID || !alive(pid)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ReapOrphans removes pybox containers left by dead instances on this host
// and returns how many it removed.
func (s *Sandbox) ReapOrphans(ctx context.Context) (int, error) {
	list, err := s.eng.List(ctx, map[string]string{LabelManaged: "true"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range list {
		if !s.owner.orphaned(c.Labels) {
			continue
		}
		if err := s.eng.Remove(ctx, c.ID); err != nil {
			s.log.Warn("orphan not removed", "container_id", c.ID, "err", err)
			continue
		}
		s.log.Info("removed orphaned container", "container_id", c.ID, "name", c.Name)
		n++
	}
	return n, nil
}

// Owner returns this instance's identity.
func (s *Sandbox) Owner() Owner { return s.owner }
