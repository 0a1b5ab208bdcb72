package downstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// httpBound is the RoundTripper of a server reached by URL: it adds the
// server's headers, and reads each answer with a bound of max bytes per
// message, so that an oversized answer to a call is refused (in its place
// comes a JSON-RPC error for that call) before more than max bytes of it
// are held, and the connection goes on.
type httpBound struct {
	headers map[string]string
	max     int
	base    http.RoundTripper
}

func (h httpBound) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	id := callID(r)
	resp, err := h.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		e := &eventBound{r: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body, max: h.max, id: id}
		e.pull = e.next
		resp.Body = e
		return resp, nil
	}
	resp.Body, err = boundBody(resp.Body, h.max, id)
	return resp, err
}

// callID is the JSON-RPC id of the call r posts (nil for anything else).
func callID(r *http.Request) json.RawMessage {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	if json.NewDecoder(body).Decode(&msg) != nil || len(msg.ID) == 0 || string(msg.ID) == "null" {
		return nil
	}
	return msg.ID
}

// errTooLarge: an answer over the bound that answers no call.
var errTooLarge = errors.New("the MCP server's message is over the size limit")

// boundBody reads a whole (JSON) body of at most max bytes; a longer one
// is refused: closed unread past max, and replaced by a refusal of call
// id (or an error, for no call).
func boundBody(body io.ReadCloser, max int, id json.RawMessage) (io.ReadCloser, error) {
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, int64(max)+1))
	switch {
	case err != nil:
		return nil, err
	case len(data) <= max:
		return io.NopCloser(bytes.NewReader(data)), nil
	case id == nil:
		return nil, fmt.Errorf("%w of %d bytes", errTooLarge, max)
	}
	return io.NopCloser(bytes.NewReader(refusal(id, max))), nil
}

// eventBound passes a server-sent event stream through, event by event,
// each of at most max bytes kept; at a longer one the stream ends, with a
// refusal of call id as its last event (or an error, for no call).
type eventBound struct {
	pieces
	r    *bufio.Reader
	body io.Closer
	max  int
	id   json.RawMessage
}

func (e *eventBound) Close() error { return e.body.Close() }

// next reads one event: lines up to an empty one.
func (e *eventBound) next() ([]byte, error) {
	var event []byte
	for {
		line, err := e.r.ReadSlice('\n')
		if len(event)+len(line) > e.max {
			if e.id == nil {
				return nil, fmt.Errorf("%w of %d bytes", errTooLarge, e.max)
			}
			e.body.Close() // nothing more is read of it
			return append(append([]byte("data: "), refusal(e.id, e.max)...), "\n\n"...), io.EOF
		}
		event = append(event, line...)
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return event, err
		}
		if err == nil && (len(line) == 1 || (len(line) == 2 && line[0] == '\r')) {
			return event, nil
		}
	}
}
