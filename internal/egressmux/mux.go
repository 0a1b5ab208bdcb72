package egressmux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// Operations of a message (see the package comment).
const (
	OpOpen  byte = 1
	OpData  byte = 2
	OpEOF   byte = 3
	OpAck   byte = 4
	OpClose byte = 5
)

// Defaults of Config.
const (
	DefaultStreams = 64
	DefaultWindow  = 64 << 10
	// MaxData is the most one Data message carries.
	MaxData = 32 << 10
	// headLen is a message's op and id.
	headLen = 5
)

// ErrProtocol wraps every error Handle returns: the runner's side broke
// the protocol, and the run must end.
var ErrProtocol = errors.New("egress channel protocol error")

// Config configures a Mux. Zero values mean the defaults.
type Config struct {
	// Send writes one message to the runner. It may block (the channel is
	// full); it is called by the streams' readers and writers, never by
	// Handle, and from several goroutines at once.
	Send func(msg []byte) error
	// Streams is how many streams may be open at once (default 64; the
	// runner opens no more). Window is each stream's window, both ways
	// (default 64 KiB).
	Streams int
	Window  int
}

// Mux is the server's end of a run's egress channel, and the listener the
// run's proxy serves.
type Mux struct {
	send    func([]byte) error
	streams int
	window  int

	mu     sync.Mutex
	open   map[uint32]*Stream
	last   uint32 // the highest id opened
	closed bool

	accept   chan *Stream // capacity streams: an Open never waits
	done     chan struct{}
	buffered atomic.Int64 // bytes from the runner not yet read by the proxy, all streams
	peak     atomic.Int64
}

// New returns a Mux over cfg.Send.
func New(cfg Config) (*Mux, error) {
	if cfg.Send == nil || cfg.Streams < 0 || cfg.Window < 0 {
		return nil, errors.New("egress channel: a Send function and non-negative limits are required")
	}
	if cfg.Streams == 0 {
		cfg.Streams = DefaultStreams
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	return &Mux{send: cfg.Send, streams: cfg.Streams, window: cfg.Window, open: map[uint32]*Stream{},
		accept: make(chan *Stream, cfg.Streams), done: make(chan struct{})}, nil
}

// Bound is the most the Mux ever holds from the runner: Streams x Window.
func (m *Mux) Bound() int64 { return int64(m.streams) * int64(m.window) }

// Buffered is what the Mux holds now from the runner, and Peak the most it
// has held at once.
func (m *Mux) Buffered() int64 { return m.buffered.Load() }

// Peak is the most Buffered has been.
func (m *Mux) Peak() int64 { return m.peak.Load() }

// Handle takes one message from the runner. It never blocks; an error
// (ErrProtocol) means the runner's side broke the protocol.
func (m *Mux) Handle(msg []byte) error {
	if len(msg) < headLen {
		return fmt.Errorf("%w: a message of %d bytes", ErrProtocol, len(msg))
	}
	op, id, body := msg[0], binary.BigEndian.Uint32(msg[1:headLen]), msg[headLen:]
	if op == OpOpen {
		return m.opened(id, body)
	}
	if op < OpData || op > OpClose {
		return fmt.Errorf("%w: unknown operation %d", ErrProtocol, op)
	}
	m.mu.Lock()
	s, last := m.open[id], m.last
	m.mu.Unlock()
	switch {
	case id == 0 || id > last:
		return fmt.Errorf("%w: stream %d was never opened", ErrProtocol, id)
	case s == nil:
		return nil // closed here; the message was in flight
	}
	return s.handle(op, body)
}

// opened registers stream id.
func (m *Mux) opened(id uint32, body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case len(body) != 0:
		return fmt.Errorf("%w: an Open with a body", ErrProtocol)
	case id != m.last+1:
		return fmt.Errorf("%w: stream %d opened after %d", ErrProtocol, id, m.last)
	case len(m.open) >= m.streams:
		return fmt.Errorf("%w: stream %d opened while %d are open (the limit)", ErrProtocol, id, len(m.open))
	}
	m.last = id
	if m.closed {
		return nil // the run's proxy is gone: nothing will serve it
	}
	s := newStream(m, id)
	m.open[id] = s
	m.accept <- s // never blocks: at most streams are open, each sent once
	return nil
}

// forget drops a stream the server has closed.
func (m *Mux) forget(id uint32) {
	m.mu.Lock()
	delete(m.open, id)
	m.mu.Unlock()
}

// hold counts n more (or, negative, fewer) bytes held from the runner.
func (m *Mux) hold(n int) {
	v := m.buffered.Add(int64(n))
	for {
		p := m.peak.Load()
		if v <= p || m.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// Accept returns the next stream the runner opened.
func (m *Mux) Accept() (net.Conn, error) {
	select {
	case s := <-m.accept:
		return s, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and every stream. Idempotent.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	streams := make([]*Stream, 0, len(m.open))
	for _, s := range m.open {
		streams = append(streams, s)
	}
	m.mu.Unlock()
	for _, s := range streams {
		s.Close()
	}
	for {
		select {
		case s := <-m.accept: // opened, never accepted
			s.Close()
		default:
			return nil
		}
	}
}

// Addr is the listener's address (the channel has none of its own).
func (m *Mux) Addr() net.Addr { return addr{} }

type addr struct{}

func (addr) Network() string { return "pybox-channel" }
func (addr) String() string  { return "runner" }

// message encodes one message.
func message(op byte, id uint32, body []byte) []byte {
	b := make([]byte, headLen+len(body))
	b[0] = op
	binary.BigEndian.PutUint32(b[1:headLen], id)
	copy(b[headLen:], body)
	return b
}

// ackMessage encodes an Ack of n bytes.
func ackMessage(id uint32, n int) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	return message(OpAck, id, b[:])
}
