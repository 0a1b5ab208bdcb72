package sandbox_test

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/egressmux"
	"github.com/pybox-dev/pybox/sandbox"
)

// netMsg is an egress channel message, hex-encoded for the fake runner.
func netMsg(op byte, id uint32, body []byte) string {
	b := append([]byte{op}, binary.BigEndian.AppendUint32(nil, id)...)
	return hex.EncodeToString(append(b, body...))
}

// TestFakeForgedEgressFrames: egress channel messages the runner's side
// forges (an oversized Data, an Ack of bytes never sent, a stream never
// opened, more streams than allowed, or any on a run without a network;
// Data past a window is egressmux's TestFloodHeldWithinBound) end the run
// with a clear protocol error in its stderr, and its container is removed.
func TestFakeForgedEgressFrames(t *testing.T) {
	allow, err := egress.ParseAllowlist([]string{"api.test"})
	if err != nil {
		t.Fatal(err)
	}
	oversized := netMsg(egressmux.OpOpen, 1, nil) + " " + netMsg(egressmux.OpData, 1, make([]byte, egressmux.MaxData+1))
	overAck := netMsg(egressmux.OpOpen, 1, nil) + " " + netMsg(egressmux.OpAck, 1, binary.BigEndian.AppendUint32(nil, 1))
	var opens []string
	for id := range uint32(egressmux.DefaultStreams + 1) {
		opens = append(opens, netMsg(egressmux.OpOpen, id+1, nil))
	}
	cases := []struct {
		name, code, want string
		egress           bool
	}{
		{"oversized data", "net " + oversized, "a Data of 32769 bytes", true},
		{"ack of what was never sent", "net " + overAck, "more than was sent", true},
		{"never opened", "net " + netMsg(egressmux.OpData, 7, []byte("x")), "stream 7 was never opened", true},
		{"too many streams", "net " + strings.Join(opens, " "), "while 64 are open (the limit)", true},
		{"without a network", "net " + netMsg(egressmux.OpOpen, 1, nil), "unexpected net frame", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			cfg := sandbox.Config{WarmPool: -1, EgressChannel: true}
			if c.egress {
				cfg.Egress = &egress.Config{Allow: allow}
			}
			sb := fakeSandbox(t, f, cfg)
			res, err := runCode(t.Context(), sb, c.code)
			if err != nil || res.ExitCode != 137 || !strings.Contains(res.Stderr, "runner protocol error") || !strings.Contains(res.Stderr, c.want) {
				t.Errorf("got %v, exit %d, stderr %q; want exit 137 and %q", err, res.ExitCode, res.Stderr, c.want)
			}
			sb.Close()
			if live, _ := f.counts(); live != 0 {
				t.Errorf("%d containers left", live)
			}
		})
	}
}
