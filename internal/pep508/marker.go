package pep508

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// markerVars are the PEP 508 environment marker variables.
var markerVars = []string{
	"python_version", "python_full_version", "os_name", "sys_platform",
	"platform_release", "platform_system", "platform_version", "platform_machine",
	"platform_python_implementation", "implementation_name", "implementation_version", "extra",
}

type tokenKind int

const (
	tokVar tokenKind = iota
	tokString
	tokOp // a version operator, "in" or "not"
	tokAnd
	tokOr
	tokOpen
	tokClose
)

type markerToken struct {
	kind tokenKind
	text string // canonical rendering
}

// parseMarker validates a PEP 508 marker and renders it canonically:
// tokens separated by single spaces, strings in double quotes.
func parseMarker(s string) (string, error) {
	toks, err := tokenizeMarker(s)
	if err != nil {
		return "", err
	}
	if len(toks) == 0 {
		return "", errors.New("empty marker after ;")
	}
	mp := markerParser{toks: toks}
	if err := mp.parseOr(); err != nil {
		return "", err
	}
	if mp.pos < len(toks) {
		return "", fmt.Errorf("unexpected %s", toks[mp.pos].text)
	}
	return renderMarker(toks), nil
}

func tokenizeMarker(s string) ([]markerToken, error) {
	var toks []markerToken
	for i := 0; i < len(s); {
		tok, n, err := nextMarkerToken(s[i:])
		if err != nil {
			return nil, err
		}
		if n == 0 { // a space
			i++
			continue
		}
		toks = append(toks, tok)
		i += n
	}
	return toks, nil
}

// nextMarkerToken reads one token from the start of s and returns its
// length, or 0 for a space to skip.
func nextMarkerToken(s string) (markerToken, int, error) {
	switch c := s[0]; {
	case c == ' ':
		return markerToken{}, 0, nil
	case c == '(':
		return markerToken{tokOpen, "("}, 1, nil
	case c == ')':
		return markerToken{tokClose, ")"}, 1, nil
	case c == '"' || c == '\'':
		body, _, ok := strings.Cut(s[1:], string(c))
		if !ok {
			return markerToken{}, 0, errors.New("unterminated string")
		}
		if strings.ContainsAny(body, "\"'\\") {
			return markerToken{}, 0, errors.New("quotes and backslashes are not allowed inside marker strings")
		}
		return markerToken{tokString, `"` + body + `"`}, len(body) + 2, nil
	case strings.IndexByte("<>=!~", c) >= 0:
		if op := clauseOp(s); op != "" {
			return markerToken{tokOp, op}, len(op), nil
		}
	case isNameByte(rune(c)):
		end := strings.IndexFunc(s, func(c rune) bool { return !isNameByte(c) })
		if end < 0 {
			end = len(s)
		}
		return wordToken(s[:end])
	}
	return markerToken{}, 0, fmt.Errorf("unexpected %q", s[:1])
}

func wordToken(w string) (markerToken, int, error) {
	switch {
	case w == "and":
		return markerToken{tokAnd, w}, len(w), nil
	case w == "or":
		return markerToken{tokOr, w}, len(w), nil
	case w == "in" || w == "not":
		return markerToken{tokOp, w}, len(w), nil
	case slices.Contains(markerVars, w):
		return markerToken{tokVar, w}, len(w), nil
	}
	return markerToken{}, 0, fmt.Errorf("unknown marker variable %q", w)
}

func renderMarker(toks []markerToken) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && t.kind != tokClose && toks[i-1].kind != tokOpen {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
	}
	return b.String()
}

// markerParser checks the PEP 508 marker grammar:
//
//	or   = and ("or" and)*
//	and  = expr ("and" expr)*
//	expr = "(" or ")" | value op value   (one variable, one string)
//	op   = version operator | "in" | "not" "in"
type markerParser struct {
	toks []markerToken
	pos  int
}

func (mp *markerParser) accept(kind tokenKind) bool {
	if mp.pos < len(mp.toks) && mp.toks[mp.pos].kind == kind {
		mp.pos++
		return true
	}
	return false
}

func (mp *markerParser) parseOr() error {
	for {
		if err := mp.parseAnd(); err != nil {
			return err
		}
		if !mp.accept(tokOr) {
			return nil
		}
	}
}

func (mp *markerParser) parseAnd() error {
	for {
		if err := mp.parseExpr(); err != nil {
			return err
		}
		if !mp.accept(tokAnd) {
			return nil
		}
	}
}

func (mp *markerParser) parseExpr() error {
	if mp.accept(tokOpen) {
		if err := mp.parseOr(); err != nil {
			return err
		}
		if !mp.accept(tokClose) {
			return errors.New("missing )")
		}
		return nil
	}
	lhs, ok := mp.next()
	if !ok {
		return errIncompleteMarker
	}
	if err := mp.parseOp(lhs); err != nil {
		return err
	}
	rhs, ok := mp.next()
	if !ok {
		return errIncompleteMarker
	}
	if !(lhs.kind == tokVar && rhs.kind == tokString || lhs.kind == tokString && rhs.kind == tokVar) {
		return fmt.Errorf("a comparison needs one marker variable and one quoted string, got %s and %s",
			lhs.text, rhs.text)
	}
	return nil
}

var errIncompleteMarker = errors.New(`incomplete comparison; write e.g. python_version >= "3.8"`)

func (mp *markerParser) next() (markerToken, bool) {
	if mp.pos >= len(mp.toks) {
		return markerToken{}, false
	}
	mp.pos++
	return mp.toks[mp.pos-1], true
}

// parseOp reads a comparison operator, "not in" being two tokens.
func (mp *markerParser) parseOp(lhs markerToken) error {
	op, ok := mp.next()
	if !ok {
		return errIncompleteMarker
	}
	if op.kind != tokOp {
		return fmt.Errorf("expected a comparison operator after %s, got %s", lhs.text, op.text)
	}
	if op.text != "not" {
		return nil
	}
	if in, ok := mp.next(); !ok || in.text != "in" {
		return errors.New(`"not" must be followed by "in"`)
	}
	return nil
}
