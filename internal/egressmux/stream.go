package egressmux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// errPeerClosed: the program's side closed the stream.
var errPeerClosed = errors.New("egress channel: the program closed the connection")

// Stream is one connection of the program's, carried over the channel: a
// net.Conn (with CloseWrite) for the proxy.
type Stream struct {
	m  *Mux
	id uint32

	wmu sync.Mutex // one Write or CloseWrite at a time, in order

	mu         sync.Mutex
	cond       sync.Cond
	store      []byte // Window bytes, from the first Data until Close
	buf        []byte // within store: received, not yet read
	unacked    int    // read, not yet acknowledged to the runner
	credit     int    // bytes we may still send the runner
	peerEOF    bool
	peerClosed bool
	wroteEOF   bool
	closed     bool
	rdl, wdl   time.Time
	rt, wt     *time.Timer
}

func newStream(m *Mux, id uint32) *Stream {
	s := &Stream{m: m, id: id, credit: m.window}
	s.cond.L = &s.mu
	return s
}

// handle takes a message for the stream (Handle has checked its head).
func (s *Stream) handle(op byte, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil // in flight when we closed it
	}
	var err error
	switch op {
	case OpData:
		err = s.data(body)
	case OpEOF:
		err = s.eof(body)
	case OpAck:
		err = s.ack(body)
	case OpClose:
		s.peerClosed = true
	}
	s.cond.Broadcast()
	return err
}

func (s *Stream) data(body []byte) error {
	switch {
	case len(body) == 0 || len(body) > MaxData:
		return fmt.Errorf("%w: stream %d: a Data of %d bytes", ErrProtocol, s.id, len(body))
	case s.peerEOF || s.peerClosed:
		return fmt.Errorf("%w: stream %d: Data after its end", ErrProtocol, s.id)
	case len(s.buf)+s.unacked+len(body) > s.m.window:
		return fmt.Errorf("%w: stream %d: %d bytes past its window of %d", ErrProtocol, s.id,
			len(s.buf)+s.unacked+len(body)-s.m.window, s.m.window)
	}
	if s.store == nil {
		s.store = make([]byte, s.m.window)
		s.buf = s.store[:0]
	}
	if cap(s.buf)-len(s.buf) < len(body) { // move what is left to the front
		s.buf = s.store[:copy(s.store, s.buf)]
	}
	s.buf = append(s.buf, body...) // fits: len(buf)+len(body) <= window = len(store)
	s.m.hold(len(body))
	return nil
}

func (s *Stream) eof(body []byte) error {
	if len(body) != 0 || s.peerEOF {
		return fmt.Errorf("%w: stream %d: a second EOF, or one with a body", ErrProtocol, s.id)
	}
	s.peerEOF = true
	return nil
}

func (s *Stream) ack(body []byte) error {
	if len(body) != 4 {
		return fmt.Errorf("%w: stream %d: an Ack of %d bytes", ErrProtocol, s.id, len(body))
	}
	n := int(binary.BigEndian.Uint32(body))
	if n == 0 || s.credit+n > s.m.window {
		return fmt.Errorf("%w: stream %d: an Ack of %d bytes, more than was sent", ErrProtocol, s.id, n)
	}
	s.credit += n
	return nil
}

// Read returns what the runner sent, and acknowledges it once the proxy
// has read half a window, or all there was.
func (s *Stream) Read(b []byte) (int, error) {
	s.mu.Lock()
	for len(s.buf) == 0 {
		if err := s.readErr(); err != nil {
			s.mu.Unlock()
			return 0, err
		}
		s.cond.Wait()
	}
	n := copy(b, s.buf)
	s.buf = s.buf[n:]
	s.m.hold(-n)
	s.unacked += n
	ack := 0
	if s.unacked >= s.m.window/2 || len(s.buf) == 0 && !s.peerEOF {
		ack, s.unacked = s.unacked, 0
	}
	s.mu.Unlock()
	if ack > 0 {
		_ = s.m.send(ackMessage(s.id, ack)) // a failed send: the channel is gone, and with it the run
	}
	return n, nil
}

// readErr is why a Read with nothing buffered ends now; nil: it waits.
func (s *Stream) readErr() error {
	switch {
	case s.closed:
		return net.ErrClosed
	case s.peerEOF || s.peerClosed:
		return io.EOF
	case expired(s.rdl):
		return os.ErrDeadlineExceeded
	}
	return nil
}

// Write sends b to the runner within its window, waiting for its Acks.
func (s *Stream) Write(b []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	done := 0
	for len(b) > 0 {
		n, err := s.take(len(b))
		if err != nil {
			return done, err
		}
		if err := s.m.send(message(OpData, s.id, b[:n])); err != nil {
			return done, err
		}
		done += n
		b = b[n:]
	}
	return done, nil
}

// take waits for window and takes up to n bytes of it (at most MaxData).
func (s *Stream) take(n int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.closed:
			return 0, net.ErrClosed
		case s.wroteEOF:
			return 0, errors.New("egress channel: write after CloseWrite")
		case s.peerClosed:
			return 0, errPeerClosed
		case expired(s.wdl):
			return 0, os.ErrDeadlineExceeded
		case s.credit > 0:
			n = min(n, s.credit, MaxData)
			s.credit -= n
			return n, nil
		}
		s.cond.Wait()
	}
}

// CloseWrite tells the runner no more data comes (the program reads EOF).
func (s *Stream) CloseWrite() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed || s.wroteEOF {
		s.mu.Unlock()
		return nil
	}
	s.wroteEOF = true
	s.mu.Unlock()
	return s.m.send(message(OpEOF, s.id, nil))
}

// Close ends the stream here and tells the runner, which then closes the
// program's connection and counts the stream as gone. Idempotent.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.m.hold(-len(s.buf))
	s.buf, s.store = nil, nil
	stop(s.rt)
	stop(s.wt)
	s.cond.Broadcast()
	s.mu.Unlock()
	s.m.forget(s.id)
	_ = s.m.send(message(OpClose, s.id, nil)) // a failed send: the channel is gone, and the stream with it
	return nil
}

func (s *Stream) LocalAddr() net.Addr  { return addr{} }
func (s *Stream) RemoteAddr() net.Addr { return addr{} }

func (s *Stream) SetDeadline(t time.Time) error {
	s.SetReadDeadline(t)
	return s.SetWriteDeadline(t)
}

func (s *Stream) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rdl, s.rt = t, s.wake(s.rt, t)
	return nil
}

func (s *Stream) SetWriteDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wdl, s.wt = t, s.wake(s.wt, t)
	return nil
}

// wake replaces old with a timer that wakes the stream's waiters at t.
func (s *Stream) wake(old *time.Timer, t time.Time) *time.Timer {
	stop(old)
	s.cond.Broadcast()
	if t.IsZero() || s.closed {
		return nil
	}
	return time.AfterFunc(time.Until(t), func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
}

func stop(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

func expired(t time.Time) bool { return !t.IsZero() && !time.Now().Before(t) }
