//go:build !linux

package quotafs

import (
	"fmt"

	"github.com/pybox-dev/pybox/internal/storage"
)

// Volume is an owner's storage kept on an image; there is none here.
type Volume struct{}

// Available says why no image can be made here.
func Available() error { return fmt.Errorf("%w: it needs Linux", ErrUnavailable) }

// Open fails: images need Linux.
func Open(Spec) (*Volume, error) { return nil, Available() }

// Usage is never called on this platform.
func (v *Volume) Usage() (storage.Usage, error) { return storage.Usage{}, Available() }

// HostDir is never called on this platform.
func (v *Volume) HostDir() string { return "" }

// Close does nothing.
func (v *Volume) Close() error { return nil }
