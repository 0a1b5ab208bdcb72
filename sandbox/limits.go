package sandbox

import (
	"errors"
	"fmt"
	"time"
)

// Limits bound one run. The zero value of each field means its default.
type Limits struct {
	Timeout     time.Duration // wall clock per run; default 30s
	Memory      int64         // bytes of RAM, no extra swap; default 512 MiB
	CPUs        float64       // CPU quota in cores; default 1
	Pids        int64         // processes and threads; default 128
	OutputBytes int           // cap per output stream; default 1 MiB
	TmpBytes    int64         // size of the /tmp tmpfs; default 64 MiB
	FileBytes   int64         // largest file a program may write (fsize); default 256 MiB
	OpenFiles   int64         // nofile ulimit; default 1024
	// The storage quota of the Sandbox's owner: its code storage, session
	// folders and the output folders of its runs under way together (see
	// Account), enforced while programs run: when the total passes it, the
	// owner's programs are stopped (Result.QuotaExceeded).
	WorkspaceBytes int64 // default 1 GiB
	WorkspaceFiles int64 // files and folders; default 100,000
	DiskReserve    int64 // bytes the host disk under a workspace keeps free; default 512 MiB, negative = none
}

// Defaults for Limits.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultMemory      = 512 << 20
	DefaultCPUs        = 1.0
	DefaultPids        = 128
	DefaultOutputBytes = 1 << 20
	DefaultTmpBytes    = 64 << 20
	DefaultFileBytes   = 256 << 20
	DefaultOpenFiles   = 1024

	DefaultWorkspaceBytes = 1 << 30
	DefaultWorkspaceFiles = 100_000
	DefaultDiskReserve    = 512 << 20
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	l.Timeout = orDefault(l.Timeout, DefaultTimeout)
	l.Memory = orDefault(l.Memory, DefaultMemory)
	l.CPUs = orDefault(l.CPUs, DefaultCPUs)
	l.Pids = orDefault(l.Pids, DefaultPids)
	l.OutputBytes = orDefault(l.OutputBytes, DefaultOutputBytes)
	l.TmpBytes = orDefault(l.TmpBytes, DefaultTmpBytes)
	l.FileBytes = orDefault(l.FileBytes, DefaultFileBytes)
	l.OpenFiles = orDefault(l.OpenFiles, DefaultOpenFiles)
	l.WorkspaceBytes = orDefault(l.WorkspaceBytes, DefaultWorkspaceBytes)
	l.WorkspaceFiles = orDefault(l.WorkspaceFiles, DefaultWorkspaceFiles)
	l.DiskReserve = orDefault(l.DiskReserve, DefaultDiskReserve)
	return l
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Validate reports limits that no container can run with.
func (l Limits) Validate() error {
	var errs []error
	if l.Timeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("timeout %v is below 100ms", l.Timeout))
	}
	if l.Memory < 32<<20 {
		errs = append(errs, fmt.Errorf("memory %d bytes is below 32 MiB", l.Memory))
	}
	if l.CPUs < 0.01 {
		errs = append(errs, fmt.Errorf("cpus %v is below 0.01", l.CPUs))
	}
	if l.Pids < 8 {
		errs = append(errs, fmt.Errorf("pids %d is below 8", l.Pids))
	}
	if l.OutputBytes < 1024 {
		errs = append(errs, fmt.Errorf("output cap %d bytes is below 1 KiB", l.OutputBytes))
	}
	if l.TmpBytes < 1<<20 || l.FileBytes < 1<<20 {
		errs = append(errs, errors.New("tmp and file size limits must be at least 1 MiB"))
	}
	if l.WorkspaceBytes < 1<<20 || l.WorkspaceFiles < 100 {
		errs = append(errs, errors.New("the workspace quota must be at least 1 MiB and 100 files"))
	}
	if l.OpenFiles < 64 {
		errs = append(errs, fmt.Errorf("open files %d is below 64", l.OpenFiles))
	}
	return errors.Join(errs...)
}
