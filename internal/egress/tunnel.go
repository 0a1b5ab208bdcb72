package egress

import (
	"errors"
	"io"
	"net"
	"sync"
)

const copyBuf = 32 << 10

// tunnel sends the client ok and relays bytes both ways until both sides
// are done, one fails, or a limit cuts it. client reads through br, which
// may already hold the first bytes the client sent after its request. gate
// runs before the first byte goes up; its error closes the tunnel.
func tunnel(client net.Conn, br io.Reader, up net.Conn, ok []byte, gate func() error) error {
	if _, err := client.Write(ok); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var upErr error
	wg.Go(func() {
		if upErr = gate(); upErr != nil {
			client.Close()
			up.Close()
			return
		}
		upErr = pipe(up, struct{ io.Reader }{br}, client)
	})
	downErr := pipe(client, up, up)
	wg.Wait()
	return errors.Join(upErr, downErr)
}

// pipe copies src to dst. At the end of src it half-closes dst so the other
// side sees the end too; on an error it closes both sides (srcConn and
// dst), which ends the opposite pipe.
func pipe(dst net.Conn, src io.Reader, srcConn net.Conn) error {
	_, err := io.CopyBuffer(struct{ io.Writer }{dst}, src, make([]byte, copyBuf))
	if err == nil {
		if closeWrite(dst) == nil {
			return nil
		}
	}
	dst.Close()
	srcConn.Close()
	return err
}

// closeWrite half-closes the connection under c's wrappers.
func closeWrite(c net.Conn) error {
	for {
		switch v := c.(type) {
		case *metered:
			c = v.Conn
		case *idleConn:
			c = v.Conn
		case interface{ CloseWrite() error }:
			return v.CloseWrite()
		default:
			return errors.ErrUnsupported
		}
	}
}
