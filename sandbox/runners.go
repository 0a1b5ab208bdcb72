package sandbox

import (
	"log/slog"
	"strings"
	"sync"

	"github.com/pybox-dev/pybox/images"
)

// maxRunners bounds the compiled runners a Sandbox keeps (~45 KB each):
// one per image and interpreter in use, a few at a time.
const maxRunners = 8

// runnerCache keeps the runner as each image's interpreter compiled it,
// so that only the first container of an image and interpreter compiles
// it (~10 ms of CPU each): that container is asked to send its compiled
// code back with its ready frame (images.RunnerFrame), before any program
// reached it, and the next ones get the code instead of the source.
// Only images named by their ID (immutable) are kept: a tag may move to
// an image with another Python, whose marshal format differs.
type runnerCache struct {
	mu     sync.Mutex
	frames map[string][]byte // key: image ID and interpreter argv
}

// runnerKey is the cache key of image and python, or "" when image is not
// named for good (images.Immutable: a whole ID or a digest).
func runnerKey(image string, python []string) string {
	if !images.Immutable(image) {
		return ""
	}
	return image + "\x00" + strings.Join(python, "\x00")
}

// frame returns the runner to hand a container of image and python: the
// compiled one when known, else the source, asking for the compiled code
// back (learn: the key to keep it under) when image can be kept.
func (rc *runnerCache) frame(image string, python []string) (runner []byte, learn string) {
	key := runnerKey(image, python)
	if key == "" {
		return images.RunnerFrame(false), ""
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if f := rc.frames[key]; f != nil {
		return f, ""
	}
	return images.RunnerFrame(true), key
}

// learn keeps compiled (a ready frame's payload) under key once it is
// checked (zlib of a bounded size); a bad one is dropped and logged.
func (rc *runnerCache) learn(key string, compiled []byte, log *slog.Logger) {
	f, err := images.CompiledFrame(compiled)
	if err != nil {
		log.Warn("a runner sent back code that is not its compiled runner; containers keep starting from source", "err", err)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.frames == nil {
		rc.frames = map[string][]byte{}
	}
	if _, ok := rc.frames[key]; !ok && len(rc.frames) >= maxRunners {
		for k := range rc.frames { // any one: a few images are in use at a time
			delete(rc.frames, k)
			break
		}
	}
	rc.frames[key] = f
}
