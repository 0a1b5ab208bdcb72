//go:build linux

package main

import "testing"

func TestAddress(t *testing.T) {
	for in, want := range map[string]string{
		`{"version":2,"address":"unix:///run/containerd/s/abc","protocol":"ttrpc"}`: "unix:///run/containerd/s/abc",
		"unix:///run/containerd/s/abc":                                              "unix:///run/containerd/s/abc",
		`{"version":2}`:                                                             `{"version":2}`,
	} {
		if got := string(address([]byte(in))); got != want {
			t.Errorf("address(%s) = %q, want %q", in, got, want)
		}
	}
}
