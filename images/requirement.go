package images

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// ErrBadRequirement is wrapped by every error ParseRequirement and
// ParseRequirements return: a package spec was refused before anything ran.
var ErrBadRequirement = errors.New("invalid package requirement")

const (
	maxRequirementLen = 500 // bytes per spec, after trimming
	maxRequirements   = 100 // specs per ParseRequirements call
)

// Requirement is one parsed PEP 508 requirement.
type Requirement struct {
	Name      string   // as written
	Key       string   // PEP 503 normalized name: lower-case, runs of -_. replaced by "-"
	Extras    []string // normalized, sorted, deduplicated; nil if none
	Specifier string   // version specifiers, normalized: no spaces, clauses sorted, e.g. ">=1.0,<2"
	Marker    string   // environment marker after ';', re-rendered from its tokens ("" if none)
	URL       string   // for "name @ url" direct references ("" if none)
}

// RequirementPolicy says what beyond plain index requirements is allowed.
// The zero value allows no URLs or paths.
type RequirementPolicy struct {
	// AllowURLs permits direct references "name @ url" whose scheme is
	// https, http, file or git+https. Bare URLs and paths stay refused.
	AllowURLs bool
}

// String renders the canonical form used for installs and cache keys, e.g.
// `pkg[a,b]>=1.0,<2; python_version >= "3.8"` or `pkg @ https://host/pkg.whl ; os_name == "nt"`.
func (r Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Key)
	if len(r.Extras) > 0 {
		b.WriteString("[" + strings.Join(r.Extras, ",") + "]")
	}
	if r.URL != "" {
		// PEP 508 needs whitespace between a URL and its marker.
		b.WriteString(" @ " + r.URL)
		if r.Marker != "" {
			b.WriteString(" ; " + r.Marker)
		}
		return b.String()
	}
	b.WriteString(r.Specifier)
	if r.Marker != "" {
		b.WriteString("; " + r.Marker)
	}
	return b.String()
}

// requirementError names the refused spec; it matches ErrBadRequirement.
type requirementError struct {
	spec string
	err  error
}

func (e *requirementError) Error() string {
	spec := e.spec
	if len(spec) > 60 {
		spec = spec[:60] + "..."
	}
	return fmt.Sprintf("%q: %v", spec, e.err)
}

func (e *requirementError) Unwrap() error { return ErrBadRequirement }

// ParseRequirement validates one spec and returns it in canonical form.
// Errors name the spec, say what is wrong and wrap ErrBadRequirement.
func ParseRequirement(spec string, p RequirementPolicy) (Requirement, error) {
	r, err := parseRequirement(strings.TrimSpace(spec), p)
	if err != nil {
		return Requirement{}, &requirementError{spec: spec, err: err}
	}
	return r, nil
}

// ParseRequirements validates every spec, reporting all refused ones at
// once, drops exact canonical duplicates and returns the rest sorted by Key
// then String. An empty list and more than 100 specs are refused.
func ParseRequirements(specs []string, p RequirementPolicy) ([]Requirement, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no packages given", ErrBadRequirement)
	}
	if len(specs) > maxRequirements {
		return nil, fmt.Errorf("%w: %d packages given, at most %d are allowed",
			ErrBadRequirement, len(specs), maxRequirements)
	}
	var reqs []Requirement
	var errs []error
	seen := make(map[string]bool)
	for _, spec := range specs {
		r, err := ParseRequirement(spec, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s := r.String(); !seen[s] {
			seen[s] = true
			reqs = append(reqs, r)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(reqs, func(a, b Requirement) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.String(), b.String()))
	})
	return reqs, nil
}

func parseRequirement(s string, p RequirementPolicy) (Requirement, error) {
	if err := checkText(s); err != nil {
		return Requirement{}, err
	}
	// The part before ';' holds no quotes (checkShell), so the first ';'
	// always starts the marker.
	head, marker, hasMarker := strings.Cut(s, ";")
	if err := checkHead(head, p); err != nil {
		return Requirement{}, err
	}
	r, err := parseHead(head, p)
	if err != nil {
		return Requirement{}, err
	}
	if hasMarker {
		if r.Marker, err = parseMarker(marker); err != nil {
			return Requirement{}, fmt.Errorf("invalid marker: %w", err)
		}
	}
	// Canonical markers gain spaces; cap what reaches pip so that the
	// canonical form always parses again.
	if len(r.String()) > maxRequirementLen {
		return Requirement{}, fmt.Errorf("longer than %d bytes once normalized", maxRequirementLen)
	}
	return r, nil
}

// checkText refuses empty, overlong and non-printable-ASCII specs.
func checkText(s string) error {
	if s == "" {
		return errors.New("empty package spec; give a package name such as \"requests>=2\"")
	}
	if len(s) > maxRequirementLen {
		return fmt.Errorf("longer than %d bytes", maxRequirementLen)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c == 0x7f:
			return errors.New("control characters and newlines are not allowed")
		case c >= 0x80:
			return errors.New("only ASCII characters are allowed")
		}
	}
	return nil
}

// checkHead refuses pip options, shell metacharacters and locations in the
// part of a spec before its marker.
func checkHead(head string, p RequirementPolicy) error {
	for _, f := range strings.Fields(head) {
		if strings.HasPrefix(f, "-") {
			return errors.New(`pip options are not allowed; give a package name such as "requests>=2"`)
		}
	}
	if err := checkShell(head); err != nil {
		return err
	}
	name, _, isURL := strings.Cut(head, "@")
	name = strings.TrimSpace(name)
	if strings.ContainsAny(name, `/\:`) || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "~") {
		return errLocation(p)
	}
	if isURL && !p.AllowURLs {
		return errLocation(p)
	}
	return nil
}

// checkShell refuses shell metacharacters and quotes. '!' may only start
// "!=" and '*' may only end a ".*" wildcard; '<' and '>' are left to the
// specifier grammar, which admits them only as operators.
func checkShell(head string) error {
	for i := 0; i < len(head); i++ {
		c := head[i]
		bad := strings.IndexByte("`$|&\\?'\"", c) >= 0 ||
			c == '!' && (i+1 == len(head) || head[i+1] != '=') ||
			c == '*' && (i == 0 || head[i-1] != '.')
		if bad {
			return fmt.Errorf("shell metacharacters are not allowed (found %q)", string(c))
		}
	}
	return nil
}

func errLocation(p RequirementPolicy) error {
	if p.AllowURLs {
		return errors.New(`bare URLs and local paths are not allowed; write "name @ https://..."`)
	}
	return errors.New(`URLs and local paths are not allowed; give a package name such as "requests>=2"`)
}

var (
	nameRE      = regexp.MustCompile(`(?i)^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$`)
	separatorRE = regexp.MustCompile(`[-_.]+`)
)

// archiveSuffixes are the endings that make pip read a name as a local file.
var archiveSuffixes = []string{
	".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz",
	".tar.xz", ".txz", ".tlz", ".tar.lz", ".tar.lzma",
}

// normalizeName applies PEP 503 normalization (also PEP 685 for extras).
func normalizeName(name string) string {
	return separatorRE.ReplaceAllString(strings.ToLower(name), "-")
}

// parseHead parses `name [extras] (specifiers | @ url)`.
func parseHead(head string, p RequirementPolicy) (Requirement, error) {
	end := strings.IndexFunc(head, func(c rune) bool { return !isNameByte(c) })
	if end < 0 {
		end = len(head)
	}
	name, rest := head[:end], strings.TrimSpace(head[end:])
	if err := checkName(name, p); err != nil {
		return Requirement{}, err
	}
	r := Requirement{Name: name, Key: normalizeName(name)}
	var err error
	if strings.HasPrefix(rest, "[") {
		if r.Extras, rest, err = parseExtras(rest); err != nil {
			return Requirement{}, err
		}
	}
	if u, ok := strings.CutPrefix(rest, "@"); ok {
		r.URL, err = parseURL(u)
		return r, err
	}
	r.Specifier, err = parseSpecifier(rest)
	return r, err
}

func isNameByte(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

func checkName(name string, p RequirementPolicy) error {
	if name == "" {
		return errors.New(`expected a package name such as "requests"`)
	}
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%q is not a valid package name", name)
	}
	lower := strings.ToLower(name)
	for _, suffix := range archiveSuffixes {
		if strings.HasSuffix(lower, suffix) {
			return errLocation(p)
		}
	}
	return nil
}

// parseExtras parses a leading "[a, b]" and returns the normalized extras
// and what follows the ']'.
func parseExtras(s string) ([]string, string, error) {
	inner, rest, ok := strings.Cut(s[1:], "]")
	if !ok {
		return nil, "", errors.New("unclosed [ in extras")
	}
	if strings.TrimSpace(inner) == "" {
		return nil, strings.TrimSpace(rest), nil
	}
	var extras []string
	for e := range strings.SplitSeq(inner, ",") {
		e = strings.TrimSpace(e)
		if !nameRE.MatchString(e) {
			return nil, "", fmt.Errorf("%q is not a valid extra name", e)
		}
		extras = append(extras, normalizeName(e))
	}
	slices.Sort(extras)
	return slices.Compact(extras), strings.TrimSpace(rest), nil
}

// urlBytes are the characters a direct-reference URL may hold: no
// whitespace, quotes or shell metacharacters.
const urlBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~:/#@+,=%"

// parseURL validates the URL of a "name @ url" direct reference.
func parseURL(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", errors.New("missing URL after @")
	}
	if i := strings.IndexFunc(s, func(c rune) bool { return !strings.ContainsRune(urlBytes, c) }); i >= 0 {
		return "", fmt.Errorf("character %q is not allowed in a URL", s[i])
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("invalid URL: %w", err)
	}
	if u.User != nil {
		return "", errors.New("credentials in URLs are not allowed")
	}
	switch u.Scheme {
	case "https", "http", "git+https":
		if u.Host == "" || u.Opaque != "" {
			return "", fmt.Errorf("%s URL needs a host", u.Scheme)
		}
	case "file":
		if u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
			return "", errors.New(`file URL needs an absolute path, e.g. "file:///wheels/pkg.whl"`)
		}
	default:
		return "", fmt.Errorf("URL scheme %q is not allowed; use https, http, file or git+https", u.Scheme)
	}
	return s, nil
}

// specifierOps lists the version operators, longest first so that prefix
// matching picks "===" over "==" and "<=" over "<". The order of
// opRank is the order clauses are rendered in: lower bounds before upper.
var specifierOps = []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"}

var opRank = map[string]int{"===": 0, "==": 1, "~=": 2, ">=": 3, ">": 4, "<=": 5, "<": 6, "!=": 7}

var (
	// versionRE is PEP 440 without epochs ('!' is refused as a shell
	// metacharacter) and without a leading "v".
	versionRE = regexp.MustCompile(`(?i)^[0-9]+(\.[0-9]+)*` +
		`([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?` +
		`(-[0-9]+|[-_.]?(post|rev|r)[-_.]?[0-9]*)?` +
		`([-_.]?dev[-_.]?[0-9]*)?` +
		`(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$`)
	releaseRE    = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
	compatibleRE = regexp.MustCompile(`^[0-9]+\.[0-9]+`) // ~= needs two release segments
	arbitraryRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)
)

// parseSpecifier parses a possibly empty, possibly parenthesized list of
// version clauses and renders it without spaces, deduplicated and sorted.
func parseSpecifier(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if inner, ok := strings.CutPrefix(s, "("); ok {
		inner, ok = strings.CutSuffix(inner, ")")
		if !ok {
			return "", errors.New("unclosed ( in version specifier")
		}
		if s = strings.TrimSpace(inner); s == "" {
			return "", errors.New("empty version specifier in parentheses")
		}
	}
	var clauses []string
	for c := range strings.SplitSeq(s, ",") {
		clause, err := parseClause(strings.TrimSpace(c))
		if err != nil {
			return "", err
		}
		clauses = append(clauses, clause)
	}
	slices.SortFunc(clauses, compareClauses)
	return strings.Join(slices.Compact(clauses), ","), nil
}

func compareClauses(a, b string) int {
	opA, opB := clauseOp(a), clauseOp(b)
	return cmp.Or(cmp.Compare(opRank[opA], opRank[opB]), strings.Compare(a[len(opA):], b[len(opB):]))
}

func clauseOp(c string) string {
	for _, op := range specifierOps {
		if strings.HasPrefix(c, op) {
			return op
		}
	}
	return ""
}

// parseClause parses one "op version" clause and renders it without spaces.
func parseClause(c string) (string, error) {
	if c == "" {
		return "", errors.New("empty version clause (stray comma?)")
	}
	op := clauseOp(c)
	if op == "" {
		return "", fmt.Errorf(`expected a version specifier such as ">=1.0" after the name, got %q`, c)
	}
	v := strings.TrimSpace(c[len(op):])
	if v == "" {
		return "", fmt.Errorf("missing version after %s", op)
	}
	if err := checkVersion(op, v); err != nil {
		return "", err
	}
	return op + v, nil
}

// checkVersion applies the PEP 440 rules for which versions go with op.
func checkVersion(op, v string) error {
	eq := op == "==" || op == "!="
	switch prefix, wild := strings.CutSuffix(v, ".*"); {
	case op == "===":
		if !arbitraryRE.MatchString(v) {
			return fmt.Errorf("invalid version %q", v)
		}
	case wild:
		if !eq {
			return fmt.Errorf("wildcard .* is only allowed with == and !=, not %s", op)
		}
		if !releaseRE.MatchString(prefix) {
			return fmt.Errorf("invalid version %q", v)
		}
	case !versionRE.MatchString(v):
		return fmt.Errorf("invalid version %q", v)
	case strings.Contains(v, "+") && !eq:
		return fmt.Errorf("local version label is only allowed with == and !=, not %s", op)
	case op == "~=" && !compatibleRE.MatchString(v):
		return errors.New(`~= needs at least two release segments, e.g. "~=1.4"`)
	}
	return nil
}

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
