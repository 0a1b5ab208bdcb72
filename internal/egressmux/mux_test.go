package egressmux

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// peer is a fake runner: it sees what the Mux sends, and sends messages
// of its own through Handle.
type peer struct {
	t   *testing.T
	m   *Mux
	mu  sync.Mutex
	got [][]byte
	new chan struct{} // a message arrived
}

func newPeer(t *testing.T, streams, window int) *peer {
	p := &peer{t: t, new: make(chan struct{}, 1)}
	m, err := New(Config{Send: p.send, Streams: streams, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	p.m = m
	t.Cleanup(func() { m.Close() })
	return p
}

func (p *peer) send(msg []byte) error {
	p.mu.Lock()
	p.got = append(p.got, msg)
	p.mu.Unlock()
	select {
	case p.new <- struct{}{}:
	default:
	}
	return nil
}

// do hands the Mux one message and fails the test on an error.
func (p *peer) do(op byte, id uint32, body []byte) {
	p.t.Helper()
	if err := p.m.Handle(message(op, id, body)); err != nil {
		p.t.Fatalf("op %d stream %d: %v", op, id, err)
	}
}

// await waits for a message of op on stream id and returns its body.
func (p *peer) await(op byte, id uint32) []byte {
	p.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		for i, msg := range p.got {
			if msg[0] == op && binary.BigEndian.Uint32(msg[1:5]) == id {
				p.got = append(p.got[:i:i], p.got[i+1:]...)
				p.mu.Unlock()
				return msg[headLen:]
			}
		}
		p.mu.Unlock()
		select {
		case <-p.new:
		case <-deadline:
			p.t.Fatalf("no message %d for stream %d", op, id)
		}
	}
}

func (p *peer) accept() *Stream {
	p.t.Helper()
	c, err := p.m.Accept()
	if err != nil {
		p.t.Fatal(err)
	}
	return c.(*Stream)
}

func ack(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// TestStreamBothWays: a stream carries bytes each way, acknowledges what
// the proxy read, half-closes each way and ends with a Close.
func TestStreamBothWays(t *testing.T) {
	p := newPeer(t, 4, 1024)
	p.do(OpOpen, 1, nil)
	s := p.accept()
	p.do(OpData, 1, []byte("hello"))
	got := make([]byte, 16)
	n, err := s.Read(got)
	if err != nil || string(got[:n]) != "hello" {
		t.Fatalf("read %q, %v", got[:n], err)
	}
	if a := p.await(OpAck, 1); binary.BigEndian.Uint32(a) != 5 {
		t.Errorf("ack of %d bytes, want 5", binary.BigEndian.Uint32(a))
	}
	p.do(OpEOF, 1, nil)
	if rest, err := io.ReadAll(s); err != nil || len(rest) != 0 {
		t.Fatalf("after EOF: %q, %v", rest, err)
	}
	if _, err := s.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if d := p.await(OpData, 1); string(d) != "world" {
		t.Errorf("runner got %q", d)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	p.await(OpEOF, 1)
	s.Close()
	p.await(OpClose, 1)
	if b := p.m.Buffered(); b != 0 {
		t.Errorf("%d bytes still held after the stream closed", b)
	}
}

// TestWriteWaitsForWindow: the server sends no more than the runner's
// window until the runner acknowledges, and a write deadline ends the wait.
func TestWriteWaitsForWindow(t *testing.T) {
	p := newPeer(t, 4, 1024)
	p.do(OpOpen, 1, nil)
	s := p.accept()
	wrote := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 3000))
		wrote <- err
	}()
	if d := p.await(OpData, 1); len(d) != 1024 {
		t.Fatalf("first data: %d bytes, want the window (1024)", len(d))
	}
	select {
	case err := <-wrote:
		t.Fatalf("write of 3000 bytes ended (%v) with 1024 acknowledged of none", err)
	default:
	}
	p.do(OpAck, 1, ack(1024))
	p.await(OpData, 1)
	p.do(OpAck, 1, ack(1024))
	if d := p.await(OpData, 1); len(d) != 3000-2048 {
		t.Errorf("last data: %d bytes", len(d))
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	s.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := s.Write(make([]byte, 2000)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("write past the window with a deadline: %v", err)
	}
}

// TestProtocolErrors: each forged or oversized message is an ErrProtocol
// and leaves nothing held.
func TestProtocolErrors(t *testing.T) {
	const window = 1024
	cases := []struct {
		name  string
		setup [][]byte
		msg   []byte
	}{
		{"short", nil, []byte{OpData, 0, 0}},
		{"unknown op", nil, message(9, 1, nil)},
		{"open out of order", nil, message(OpOpen, 2, nil)},
		{"open with a body", nil, message(OpOpen, 1, []byte("x"))},
		{"open past the limit", [][]byte{message(OpOpen, 1, nil), message(OpOpen, 2, nil)}, message(OpOpen, 3, nil)},
		{"data never opened", [][]byte{message(OpOpen, 1, nil)}, message(OpData, 2, []byte("x"))},
		{"data for stream 0", nil, message(OpData, 0, []byte("x"))},
		{"empty data", [][]byte{message(OpOpen, 1, nil)}, message(OpData, 1, nil)},
		{"data past the window", [][]byte{message(OpOpen, 1, nil), message(OpData, 1, make([]byte, 1000))}, message(OpData, 1, make([]byte, 25))},
		{"oversized data", [][]byte{message(OpOpen, 1, nil)}, message(OpData, 1, make([]byte, MaxData+1))},
		{"data after EOF", [][]byte{message(OpOpen, 1, nil), message(OpEOF, 1, nil)}, message(OpData, 1, []byte("x"))},
		{"second EOF", [][]byte{message(OpOpen, 1, nil), message(OpEOF, 1, nil)}, message(OpEOF, 1, nil)},
		{"ack of nothing sent", [][]byte{message(OpOpen, 1, nil)}, message(OpAck, 1, ack(1))},
		{"ack of zero", [][]byte{message(OpOpen, 1, nil)}, message(OpAck, 1, ack(0))},
		{"short ack", [][]byte{message(OpOpen, 1, nil)}, message(OpAck, 1, []byte{1})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPeer(t, 2, window)
			for _, m := range c.setup {
				if err := p.m.Handle(m); err != nil {
					t.Fatalf("setup: %v", err)
				}
			}
			if err := p.m.Handle(c.msg); !errors.Is(err, ErrProtocol) {
				t.Errorf("got %v, want an ErrProtocol", err)
			}
			if b := p.m.Buffered(); b > window {
				t.Errorf("%d bytes held", b)
			}
		})
	}
}

// TestFloodHeldWithinBound is the flood: a runner opens every stream it
// may and sends as fast as its windows let it while the proxy reads
// nothing; then a forging runner ignores the windows. The Mux never holds
// more than Streams x Window, and the forger is stopped by an ErrProtocol.
func TestFloodHeldWithinBound(t *testing.T) {
	const streams, window = 64, 64 << 10
	p := newPeer(t, streams, window)
	chunk := bytes.Repeat([]byte("x"), MaxData)
	var sent int64
	for id := uint32(1); id <= streams; id++ {
		p.do(OpOpen, id, nil)
		for range window / MaxData {
			p.do(OpData, id, chunk)
			sent += MaxData
		}
	}
	if got, bound := p.m.Buffered(), p.m.Bound(); got != bound || bound != streams*window {
		t.Fatalf("held %d bytes after a full window on each stream, want the bound %d", got, streams*window)
	}
	var err error
	for i := 0; i < 1<<14 && err == nil; i++ { // 512 MiB more, if it were taken
		err = p.m.Handle(message(OpData, uint32(1+i%streams), chunk))
		sent += MaxData
	}
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("a runner sending past its windows: %v; %d KiB held", err, p.m.Peak()>>10)
	}
	t.Logf("sent %d KiB, held at most %d KiB (bound %d KiB)", sent>>10, p.m.Peak()>>10, p.m.Bound()>>10)
	if p.m.Peak() > p.m.Bound() {
		t.Errorf("held %d bytes at the peak, past the bound %d", p.m.Peak(), p.m.Bound())
	}
	p.m.Close()
	if b := p.m.Buffered(); b != 0 {
		t.Errorf("%d bytes held after Close", b)
	}
}

// TestStreamSlotsReturn: a stream the server closed frees its place (a new
// Open is taken), and late messages for it are dropped, not errors.
func TestStreamSlotsReturn(t *testing.T) {
	p := newPeer(t, 1, 1024)
	p.do(OpOpen, 1, nil)
	s := p.accept()
	s.Close()
	p.await(OpClose, 1)
	p.do(OpData, 1, []byte("late"))
	p.do(OpClose, 1, nil)
	p.do(OpOpen, 2, nil)
	if p.accept().id != 2 {
		t.Error("stream 2 not accepted")
	}
	if b := p.m.Buffered(); b != 0 {
		t.Errorf("%d bytes held for a closed stream", b)
	}
}

// TestCloseWakesEverything: Close ends a waiting Accept, Read and Write.
func TestCloseWakesEverything(t *testing.T) {
	p := newPeer(t, 4, 16)
	p.do(OpOpen, 1, nil)
	s := p.accept()
	s.Write(make([]byte, 16)) // the whole window
	errs := make(chan error, 3)
	go func() { _, err := s.Read(make([]byte, 1)); errs <- err }()
	go func() { _, err := s.Write([]byte("x")); errs <- err }()
	go func() { _, err := p.m.Accept(); errs <- err }()
	p.m.Close()
	for range 3 {
		if err := <-errs; !errors.Is(err, net.ErrClosed) {
			t.Errorf("after Close: %v, want net.ErrClosed", err)
		}
	}
	if err := p.m.Handle(message(OpOpen, 2, nil)); err != nil {
		t.Errorf("an Open after Close: %v", err)
	}
}

// TestReadDeadline: a Read with nothing to read ends at its deadline; the
// program closing the stream ends it with EOF.
func TestReadDeadline(t *testing.T) {
	p := newPeer(t, 4, 1024)
	p.do(OpOpen, 1, nil)
	s := p.accept()
	s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read with a deadline: %v", err)
	}
	s.SetReadDeadline(time.Time{})
	p.do(OpClose, 1, nil)
	if _, err := s.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after the program closed: %v", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, errPeerClosed) {
		t.Errorf("write after the program closed: %v", err)
	}
}
