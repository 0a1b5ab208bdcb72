//go:build !linux

package testenv

import "syscall"

// orphanGuard: only Linux kills a child with its parent; the Kubernetes
// test node, its only user, runs on Linux alone.
func orphanGuard() *syscall.SysProcAttr { return nil }

// unmount: see orphanGuard.
func unmount(string) {}
