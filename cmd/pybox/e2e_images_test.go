//go:build !windows

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// testImageTag tags the test images this process builds
// (testenv.BuildImage), each test its own repository: no other test,
// process or suite on the daemon builds or removes them, so a build needs
// no layer-cache lock.
var testImageTag = fmt.Sprintf("t%d-%d", os.Getpid(), time.Now().UnixNano())

// The tests' own images.
var (
	condaImage      = "pybox-test-conda:" + testImageTag       // TestCondaEnvironment
	condaProbeImage = "pybox-test-conda-probe:" + testImageTag // TestConfigureRecordsInterpreter
	venv2Image      = "pybox-test-venv2:" + testImageTag
	rootVenvImage   = "pybox-test-rootvenv:" + testImageTag
	impostorImage   = "pybox-test-impostors:" + testImageTag
	// Images of TestHTTPTenantImages: an operator's private image (a
	// secret baked in) and one the operator allows.
	privateImage = "pybox-test-private:" + testImageTag
	allowedImage = "pybox-test-allowed:" + testImageTag
)

// testAllowedImages lets the tests' own images be environments.
var testAllowedImages = "PYBOX_ALLOWED_IMAGES=" + strings.Join([]string{condaImage, condaProbeImage, venv2Image, rootVenvImage,
	impostorImage, "pybox-test-nosuch:latest"}, ",")

const imageSecret = "operator-db-password-0123" // in privateImage

// TestHTTPTenantImages: a tenant's environment starts only from pybox's
// runtime images, the configured image and the images the operator lists
// in PYBOX_ALLOWED_IMAGES, named by full reference, or from its own
// package layers. Tenant b can select neither an image by an ID prefix
// (the daemon resolves prefixes), nor the operator's private image by
// name, nor tenant a's package layer by tag, ID or ID prefix; the listed
// image works. a's layer is not handed to b by the layer cache either.
func TestHTTPTenantImages(t *testing.T) {
	eng := testenv.Docker(t)
	layerTest(t, func() {
		testenv.RuntimeImage(t, eng, "base")
		secretFile := map[string]string{"secret": imageSecret + "\n"}
		testenv.BuildImage(t, eng, privateImage, "FROM pybox-runtime:base\nCOPY secret /opt/secret\n", secretFile)
		testenv.BuildImage(t, eng, allowedImage, "FROM pybox-runtime:base\nLABEL pybox.test.allowed=yes\n", nil)
	})
	private, _, err := eng.InspectImage(t.Context(), privateImage)
	if err != nil {
		t.Fatal(err)
	}
	wh := testenv.Wheelhouse(t)
	testenv.WriteWheel(t, wh, testenv.Wheel{Name: "pyboxalice", Version: "1.0", Code: "SECRET = 'alice-secret-42'\n"})
	dropTestLayers(t)
	h := startHTTP(t, false, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none", "PYBOX_ALLOWED_IMAGES=docker.io/library/"+allowedImage)
	a, b := h.connect(tokenA), h.connect(tokenB)
	if res, out := callOK(t, a, "install_dependencies", map[string]any{"packages": []string{"pyboxalice"}}); res.IsError {
		t.Fatalf("tenant a's install: %s", out)
	}
	aEnv := httpEnv(t, a)
	probe := "import os, sys\nprint(open('/opt/secret').read() if os.path.exists('/opt/secret') else 'no secret')\n" +
		"try:\n    import pyboxalice; print(pyboxalice.SECRET)\nexcept ImportError:\n    print('no pyboxalice')\n"
	refusedImage := func(name, ref string) {
		t.Helper()
		for _, typ := range []string{"image", "venv-uv"} {
			res, out := callOK(t, b, "configure_environment", map[string]any{"type": typ, "image": ref})
			if !res.IsError {
				_, ran := callOK(t, b, "execute_code", map[string]any{"code": probe})
				t.Errorf("tenant b selected %s (%s, type %s): %s; a program there printed %q", name, ref, typ, out, ran)
				continue
			}
			if !strings.Contains(out, "not allowed") {
				t.Errorf("tenant b, %s (%s): %s; want a refusal saying it is not allowed", name, ref, out)
			}
		}
	}
	refusedImage("an image by a 1-digit ID prefix", strings.TrimPrefix(private.ID, "sha256:")[:1])
	refusedImage("the private image by a 6-digit ID prefix", strings.TrimPrefix(private.ID, "sha256:")[:6])
	refusedImage("the private image by its ID", private.ID)
	refusedImage("the private image by name", privateImage)
	refusedImage("a's layer by tag", aEnv.Image)
	refusedImage("a's layer by ID", aEnv.ImageID)
	refusedImage("a's layer by a 12-digit ID prefix", strings.TrimPrefix(aEnv.ImageID, "sha256:")[:12])
	// b installing the same package gets a layer of its own, not a's.
	if res, out := callOK(t, b, "install_dependencies", map[string]any{"packages": []string{"pyboxalice"}}); res.IsError {
		t.Fatalf("tenant b's install: %s", out)
	}
	if bEnv := httpEnv(t, b); bEnv.ImageID == aEnv.ImageID || bEnv.Image == aEnv.Image {
		t.Errorf("tenant b's install was handed tenant a's layer %s (%s)", bEnv.Image, bEnv.ImageID)
	}
	// The image the operator allows works, named as users name it.
	if res, out := callOK(t, b, "configure_environment", map[string]any{"type": "venv-uv", "image": allowedImage}); res.IsError {
		t.Fatalf("tenant b, the allowed image %s: %s", allowedImage, out)
	}
	if _, out := callOK(t, b, "execute_code", map[string]any{"code": probe}); !strings.Contains(out, "no secret\nno pyboxalice") {
		t.Errorf("tenant b in the allowed image: %q", out)
	}
	// a still has its own layer, by tag.
	if res, out := callOK(t, a, "configure_environment", map[string]any{"type": "venv-uv", "image": aEnv.Image}); res.IsError {
		t.Errorf("tenant a, its own layer by tag: %s", out)
	}
}

// httpEnv is a tenant's environment.
func httpEnv(t *testing.T, cs *mcp.ClientSession) tools.EnvironmentView {
	t.Helper()
	res, _ := callOK(t, cs, "get_environment_config", map[string]any{})
	return decode[tools.EnvironmentView](t, res)
}
