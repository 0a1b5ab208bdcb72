// Package pep508 parses and checks Python package requirements (PEP 508,
// with PEP 440 version specifiers and PEP 503 names) into a canonical form
// for installs and cache keys, refusing anything that is not a plain
// requirement (options, paths, shell text) before it reaches an installer.
package pep508

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// ErrBad is wrapped by every error Parse and
// ParseAll return: a package spec was refused before anything ran.
var ErrBad = errors.New("invalid package requirement")

const (
	maxRequirementLen = 500 // bytes per spec, after trimming
	maxRequirements   = 100 // specs per ParseAll call
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

// Policy says what beyond plain index requirements is allowed.
// The zero value allows no URLs or paths.
type Policy struct {
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

// requirementError names the refused spec; it matches ErrBad.
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

func (e *requirementError) Unwrap() error { return ErrBad }

// Parse validates one spec and returns it in canonical form.
// Errors name the spec, say what is wrong and wrap ErrBad.
func Parse(spec string, p Policy) (Requirement, error) {
	r, err := parseRequirement(strings.TrimSpace(spec), p)
	if err != nil {
		return Requirement{}, &requirementError{spec: spec, err: err}
	}
	return r, nil
}

// ParseAll validates every spec, reporting all refused ones at
// once, drops exact canonical duplicates and returns the rest sorted by Key
// then String. An empty list and more than 100 specs are refused.
func ParseAll(specs []string, p Policy) ([]Requirement, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no packages given", ErrBad)
	}
	if len(specs) > maxRequirements {
		return nil, fmt.Errorf("%w: %d packages given, at most %d are allowed",
			ErrBad, len(specs), maxRequirements)
	}
	var reqs []Requirement
	var errs []error
	seen := make(map[string]bool)
	for _, spec := range specs {
		r, err := Parse(spec, p)
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

func parseRequirement(s string, p Policy) (Requirement, error) {
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
func checkHead(head string, p Policy) error {
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

func errLocation(p Policy) error {
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

// NormalizeName applies PEP 503 normalization (also PEP 685 for extras).
func NormalizeName(name string) string {
	return separatorRE.ReplaceAllString(strings.ToLower(name), "-")
}

// parseHead parses `name [extras] (specifiers | @ url)`.
func parseHead(head string, p Policy) (Requirement, error) {
	end := strings.IndexFunc(head, func(c rune) bool { return !isNameByte(c) })
	if end < 0 {
		end = len(head)
	}
	name, rest := head[:end], strings.TrimSpace(head[end:])
	if err := checkName(name, p); err != nil {
		return Requirement{}, err
	}
	r := Requirement{Name: name, Key: NormalizeName(name)}
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

func checkName(name string, p Policy) error {
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
		extras = append(extras, NormalizeName(e))
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
