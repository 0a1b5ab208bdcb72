// Package egressmux carries a run's egress connections over its runner's
// channel (the container's stdin and stdout, which the server already
// holds), for backends whose containers cannot reach a unix socket on the
// server's host (Kubernetes). The runner listens on the container's
// loopback as it does with a socket folder, and sends each connection as a
// stream of messages; the Mux is a net.Listener whose connections are
// those streams, served by the run's egress proxy (internal/egress) like
// any other: same checks, same limits, same report.
//
// A message is an operation, a stream id and its body:
//
//	op (1 byte) | id (4 bytes, big-endian) | body
//	Open  (runner -> server)  no body; ids start at 1 and go up by one
//	Data  (both ways)         1 to MaxData bytes, within the receiver's window
//	EOF   (both ways)         no body: the sender will send no more data
//	Ack   (both ways)         4 bytes, big-endian: the receiver consumed n bytes
//	Close (both ways)         no body: the sender is done with the stream
//
// Bounded by construction: the runner's side is the program's, so every
// message is checked before anything is kept for it. A stream's sender
// may have at most Window bytes unacknowledged; the server acknowledges
// only what the proxy has read, so it holds at most Window bytes per
// stream, and at most Config.Streams streams are open at once (a stream
// counts from its Open until the server's Close): a run's buffered bytes
// never exceed Streams x Window, whatever the program writes. An Open out
// of order or past Streams, Data past the window or for a stream never
// opened, an Ack for more than was sent, an unknown operation or a short
// message is a protocol error: Handle returns it and the caller ends the
// run. Messages for a stream the server has closed (in flight when it
// closed) are dropped, and cost nothing.
//
// Lifecycle: New, then Handle for each message from the runner (never
// blocks: it only records and wakes), Accept for the proxy; Close ends
// every stream and Accept. Safe for concurrent use.
package egressmux
