package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/lease"
)

// Labels every pybox container carries (see internal/contract).
const (
	LabelManaged = contract.LabelManaged
	LabelOwner   = contract.LabelOwner
	LabelLease   = contract.LabelLease
	LabelHost    = contract.LabelHost
	LabelPID     = contract.LabelPID
	LabelRole    = contract.LabelRole
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
	// Every instance label is set, the lease and uid empty when there are
	// none (labels sets the uid), so that none inherited from the image
	// stands (contract.InstanceLabels).
	return map[string]string{
		LabelManaged: "true", LabelOwner: o.ID, LabelHost: o.Host,
		LabelPID: strconv.Itoa(o.PID), LabelRole: role, LabelLease: o.Lease, LabelUID: "",
	}
}

// ContainerName is unique per instance: pybox-<role>-<owner>-<n>.
func (o Owner) ContainerName(role string) string {
	return fmt.Sprintf("pybox-%s-%s-%d", role, o.ID, o.seq.Add(1))
}

// Owner returns this instance's identity.
func (s *Sandbox) Owner() Owner { return s.owner }
