// Package pybox holds files embedded from the repository root, so that the
// binary carries them wherever it runs.
package pybox

import _ "embed"

// DockerfileRuntime is Dockerfile.runtime, the recipe of the runtime image
// (see package images).
//
//go:embed Dockerfile.runtime
var DockerfileRuntime []byte
