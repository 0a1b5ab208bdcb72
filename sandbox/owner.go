package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/pybox-dev/pybox/internal/lease"
)

// Labels every pybox container carries.
const (
	LabelManaged = "pybox.managed" // always "true"
	LabelOwner   = "pybox.owner"   // the instance that created it
	LabelLease   = "pybox.lease"   // that instance's lease file (absolute path); absent without a lease dir
	LabelHost    = "pybox.host"    // hostname of that instance (information only)
	LabelPID     = "pybox.pid"     // its process id in its own PID namespace (information only)
	LabelRole    = "pybox.role"    // run, session, install
)

// Owner identifies this server instance on a shared daemon.
type Owner struct {
	ID    string // 32 random hex digits: never collides
	Host  string
	PID   int
	Lease string // absolute path of the lease file it holds; "" = none
	seq   *atomic.Int64
}

// NewOwner returns a fresh identity for this process, without a lease.
func NewOwner() Owner {
	host, _ := os.Hostname() // the hostname is only informative
	return Owner{ID: lease.NewID(), Host: host, PID: os.Getpid(), seq: new(atomic.Int64)}
}

// Labels are the labels of a container with role created by this instance.
func (o Owner) Labels(role string) map[string]string {
	l := map[string]string{
		LabelManaged: "true", LabelOwner: o.ID, LabelHost: o.Host,
		LabelPID: strconv.Itoa(o.PID), LabelRole: role,
	}
	if o.Lease != "" {
		l[LabelLease] = o.Lease
	}
	return l
}

// ContainerName is unique per instance: pybox-<role>-<owner>-<n>.
func (o Owner) ContainerName(role string) string {
	return fmt.Sprintf("pybox-%s-%s-%d", role, o.ID, o.seq.Add(1))
}

// Owner returns this instance's identity.
func (s *Sandbox) Owner() Owner { return s.owner }
