package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/singleflight"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/engine"
)

// Labels on package-layer images.
const (
	LabelKey          = "pybox.key"          // content key of the layer
	LabelRequirements = "pybox.requirements" // JSON list of the canonical specs installed in the lineage
	LabelDepth        = "pybox.depth"        // package layers above the base
	LabelEnvType      = "pybox.env-type"     // environment type that built it
	layerRepo         = "pybox-env"          // repository of package-layer tags
	// wheelhouseMount is inside the install container's /tmp tmpfs, so its
	// mount point is not a change of the container (nor of the layer).
	wheelhouseMount = "/tmp/wheelhouse"
)

// ErrInstallFailed: the installer ran and failed; the error text carries its output.
var ErrInstallFailed = errors.New("package installation failed")

// Index is where packages come from and in what form.
type Index struct {
	URL        string // --index-url; "" = the installer's default (PyPI)
	ExtraURL   string // --extra-index-url
	Wheelhouse string // host directory of wheels, mounted read-only; alone, no index is used
	// Network is what the download step reaches, always through pybox's
	// egress proxy (its container has network none: only loopback):
	// "" or "index", the index hosts (PyPI's pypi.org and
	// files.pythonhosted.org without URL) plus Allow; "allowlist", Allow
	// alone; "none", nothing (installs from Wheelhouse).
	Network string
	// Allow are host names (or *.suffix, with an optional :port) the
	// download step may reach besides the index hosts (say, the host a
	// private index serves its files from).
	Allow []string
	// Egress are the proxy's other settings: the private addresses the
	// operator allows (AllowAddrs), its Resolver and Limits. Its Allow is
	// ignored (see Network).
	Egress egress.Config
	// AllowSdist lets the installer build source distributions (running
	// their build code, unprivileged, in the install container) when no
	// wheel fits; false (the default) installs wheels only.
	AllowSdist bool
}

// Owner labels and names the containers an installer creates, so a dead
// server's leftovers can be reaped.
type Owner interface {
	Labels(role string) map[string]string
	ContainerName(role string) string
}

// Installer runs installs in their own containers and commits the result
// as content-addressed image layers. Safe for concurrent use.
type Installer struct {
	Engine *engine.Client
	Owner  Owner
	Index  Index
	// Tenant owns the layers this installer makes ("" = the server, no
	// tenants): it is part of their keys and labels, so no tenant's
	// install finds, or is handed, another's layer.
	Tenant   string
	MaxDepth int           // layers before a rebuild from the base; default 8
	Timeout  time.Duration // per install; default 10 minutes
	// LayerBytes bounds the disk the package layers of Tenant take (each
	// layer's own size, not the images under it): an install whose layer
	// would pass it fails with ErrLayerBudget and commits nothing; default
	// DefaultLayerBytes.
	LayerBytes int64
	Log        *slog.Logger // nil discards
	// Refuse, when set, is why this installer cannot install on the
	// configured backend (Kubernetes pulls images, it cannot commit a
	// container): every install that would build a layer fails with it.
	Refuse error
	// TempDir makes each install's staging folder (its wheelhouse copy and
	// downloads); nil: os.MkdirTemp in the system's temporary folder,
	// where a killed server's staging stays. The server's is its
	// sandbox's (sandbox.Sandbox.TempDir), which goes with the server.
	TempDir func(pattern string) (string, error)

	group    singleflight.Group // one build per layer key at a time
	budgetMu sync.Mutex         // one layer budget check and commit at a time

	// Builds outlive the caller that started them (others may wait for the
	// same layer) but not the Installer: they run on life, which Close
	// cancels, and Close waits for them.
	lifeOnce sync.Once
	life     context.Context
	stop     context.CancelFunc
	mu       sync.Mutex
	closed   bool
	builds   sync.WaitGroup
}

// lifetime is the context builds run on.
func (in *Installer) lifetime() context.Context {
	in.lifeOnce.Do(func() { in.life, in.stop = context.WithCancel(context.Background()) })
	return in.life
}

// Close stops the builds under way (their containers are removed) and
// waits for them; later installs fail.
func (in *Installer) Close() {
	in.lifetime()
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
	in.stop()
	in.builds.Wait()
}

// errInstallerClosed: the server is stopping.
var errInstallerClosed = errors.New("the server is stopping: no install starts")

// layer is one planned install.
type layer struct {
	parent    engine.Image
	base      engine.Image // the lineage's base image: where downloads run
	parentRef string
	specs     []string // what this layer installs
	all       []string // the lineage's full requirement set after it
	depth     int
	installer string
	key       string
}

// Tag is the image tag of a layer key.
func (l layer) tag() string { return layerRepo + ":" + l.key[:32] }

// plan decides the parent and the specs for installing add on top of env.
func (in *Installer) plan(ctx context.Context, env Environment, add []string) (layer, error) {
	l := layer{all: mergeSpecs(env.Requirements, add), specs: add, depth: env.Depth + 1, parentRef: env.Ref()}
	if l.depth > in.maxDepth() {
		l.parentRef, l.specs, l.depth = env.BaseImage, l.all, 1
	}
	img, found, err := inspectRef(ctx, in.Engine, l.parentRef)
	if err != nil {
		return l, err
	}
	if !found {
		return l, fmt.Errorf("image %s does not exist", l.parentRef)
	}
	l.parent, l.installer = img, installerFor(env, img)
	if l.base, found, err = inspectRef(ctx, in.Engine, env.BaseImage); err != nil {
		return l, err
	} else if !found {
		return l, fmt.Errorf("image %s does not exist", env.BaseImage)
	}
	l.key = layerKey(img.ID, l.installer, env.Python(), l.specs, in.Index, wheelhouseDigest(in.Index.Wheelhouse), in.Tenant)
	return l, nil
}

func (in *Installer) maxDepth() int {
	if in.MaxDepth > 0 {
		return in.MaxDepth
	}
	return 8
}

// installerFor is uv for a venv-uv environment whose image has uv, else pip.
func installerFor(env Environment, img engine.Image) string {
	if env.Type == EnvVenvUV && img.Labels[LabelInstaller] == "uv" {
		return "uv"
	}
	return "pip"
}

// layerKey hashes everything that decides a layer's content. Whether
// sdists were allowed is part of it: a layer that may hold packages built
// from source (by their own build code) is never reused as a wheels-only one.
func layerKey(parentID, installer string, python, specs []string, idx Index, wheels, tenant string) string {
	h := sha256.New()
	for _, part := range []string{parentID, installer, strings.Join(python, "\x00"), strings.Join(specs, "\x00"),
		idx.URL, idx.ExtraURL, wheels, strconv.FormatBool(idx.AllowSdist)} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	if tenant != "" { // the server's keys stay those of earlier versions
		fmt.Fprintf(h, "tenant %d:%s;", len(tenant), tenant)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// wheelhouseDigest summarises a wheelhouse (names, sizes, times) so a
// changed wheelhouse makes new keys. Symlinks are followed, as the bind
// mount and pip follow them.
func wheelhouseDigest(dir string) string {
	if dir == "" {
		return ""
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	h := sha256.New()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // unreadable entries simply do not count
		}
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", p, fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// mergeSpecs adds specs to have, a new spec replacing one of the same name.
func mergeSpecs(have, add []string) []string {
	byName := map[string]string{}
	for _, s := range append(slices.Clone(have), add...) {
		byName[specName(s)] = s
	}
	out := make([]string, 0, len(byName))
	for _, s := range byName {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// specName is the normalized project name at the start of a canonical spec.
func specName(spec string) string {
	end := strings.IndexAny(spec, "[<>=!~;@ (")
	if end < 0 {
		end = len(spec)
	}
	return normalizeName(spec[:end])
}

// command is the install container's argv: the environment's interpreter
// running dirsWrapper, which reports the package directories and then runs
// the installer. downloaded: packages come only from the download step's
// files (and the wheelhouse), with no index.
func (in *Installer) command(env Environment, l layer, downloaded bool) []string {
	var installer []string
	if l.installer == "uv" {
		installer = []string{"uv", "pip", "install", "--no-cache", "--python", "{python}"}
	} else {
		installer = []string{"{python}", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
			"--no-input", "--progress-bar", "off", "--no-user"}
	}
	argv := append(slices.Clone(env.Python()), wrapperArgs(installer)...)
	argv = append(append(argv, in.indexArgs(in.Index.Wheelhouse != "", downloaded)...), in.binaryArgs(l.installer)...)
	return append(append(argv, "--"), l.specs...)
}

// indexArgs are the installer's options for where packages come from:
// with downloaded, the download step's files and the wheelhouse only.
func (in *Installer) indexArgs(wheelhouse, downloaded bool) []string {
	var args []string
	switch {
	case downloaded:
		args = append(args, "--no-index", "--find-links", downloadsMount)
		if wheelhouse {
			args = append(args, "--find-links", wheelhouseMount)
		}
		return args
	case wheelhouse && in.Index.URL == "" && in.Index.ExtraURL == "":
		args = append(args, "--no-index", "--find-links", wheelhouseMount)
	case wheelhouse:
		args = append(args, "--find-links", wheelhouseMount)
	}
	if in.Index.URL != "" {
		args = append(args, "--index-url", in.Index.URL)
	}
	if in.Index.ExtraURL != "" {
		args = append(args, "--extra-index-url", in.Index.ExtraURL)
	}
	// An index the operator gave as http:// is meant: pip would ignore it
	// (outside localhost) without --trusted-host.
	for _, u := range []string{in.Index.URL, in.Index.ExtraURL} {
		if strings.HasPrefix(u, "http://") && urlHost(u) != "" {
			args = append(args, "--trusted-host", urlHost(u))
		}
	}
	return args
}

// binaryArgs say in what form packages may come: wheels only unless
// sdists are allowed.
func (in *Installer) binaryArgs(installer string) []string {
	switch {
	case !in.Index.AllowSdist:
		return []string{"--only-binary", ":all:"}
	case installer == "pip":
		return []string{"--prefer-binary"}
	}
	return nil
}

// labelsJSON renders the requirement list for a label.
func labelsJSON(specs []string) string {
	b, _ := json.Marshal(specs) // a []string always marshals
	return string(b)
}

// commitChanges are the Dockerfile instructions applied on commit: the
// parent's command and user back, provenance labels, and the install
// container's instance labels (owner, lease, host, pid, role, uid) cleared
// so containers from the image are not mistaken for pybox's own nor tied to
// the server that installed.
func commitChanges(env Environment, l layer, tenant string, now time.Time) []string {
	labels := [][2]string{
		{ocispec.AnnotationCreated, now.UTC().Format(time.RFC3339)},
		{ocispec.AnnotationBaseImageName, l.parentRef},
		{ocispec.AnnotationBaseImageDigest, l.parent.ID},
		{ocispec.AnnotationDescription, "pybox package layer: " + strings.Join(l.specs, " ")},
		{LabelKey, l.key}, {LabelRequirements, labelsJSON(l.all)}, {LabelDepth, strconv.Itoa(l.depth)},
		{LabelEnvType, env.Type}, {LabelTenant, tenant}, {contract.LabelManaged, "image"},
	}
	for _, k := range contract.InstanceLabels { // the install container's ties to its server
		v := ""
		if k == contract.LabelRole {
			v = "package-layer"
		}
		labels = append(labels, [2]string{k, v})
	}
	changes := make([]string, 0, len(labels)+2)
	for _, kv := range labels {
		changes = append(changes, "LABEL "+kv[0]+"="+dockerfileQuote(kv[1]))
	}
	// The container ran as InstallUser; the layer keeps the parent's user
	// (root when it names none).
	changes = append(changes, "USER "+orDefaultString(l.parent.User, "0:0"))
	if len(l.parent.Cmd) > 0 {
		cmd, _ := json.Marshal(l.parent.Cmd) // a []string always marshals
		changes = append(changes, "CMD "+string(cmd))
	}
	return changes
}

// dockerfileQuote double-quotes v for a Dockerfile LABEL.
func dockerfileQuote(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ")
	return `"` + r.Replace(v) + `"`
}

func wheelhouseOK(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("wheelhouse %s is not a readable directory", dir)
	}
	return nil
}
