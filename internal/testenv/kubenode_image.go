package testenv

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// PauseImage is the pod sandboxes' image on a test node.
const PauseImage = "k8s.local/pause:1"

// pauseArchive is PauseImage as a docker-archive tar (what `docker save`
// writes): one layer holding the static pause binary. It is written here,
// byte for byte the same on every run, so a node start leaves nothing on
// the Docker daemon (an image imported there each run left a dangling
// copy behind the next run's tag).
func pauseArchive(pause []byte) ([]byte, error) {
	epoch := time.Unix(0, 0)
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(pause)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := lw.Write(pause); err != nil {
		return nil, err
	}
	if err := lw.Close(); err != nil {
		return nil, err
	}
	diff := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux", "created": epoch.UTC(),
		"config": map[string]any{"Entrypoint": []string{"/pause"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
	})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(config)
	configName := hex.EncodeToString(sum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{PauseImage}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		body []byte
	}{{"layer.tar", layer.Bytes()}, {configName, config}, {"manifest.json", manifest}} {
		if err := w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := w.Write(f.body); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), w.Close()
}

// importPause imports PauseImage, made from $PYBOX_K8S_BIN/pause, into the
// node's containerd; the Docker daemon is not involved.
func (n *Node) importPause(bin string) error {
	pause, err := os.ReadFile(filepath.Join(bin, "pause"))
	if err != nil {
		return err
	}
	archive, err := pauseArchive(pause)
	if err != nil {
		return err
	}
	imp := exec.Command("ctr", "-a", n.sock, "-n", "k8s.io", "images", "import", "-")
	imp.Stdin = bytes.NewReader(archive)
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr import %s: %v: %s", PauseImage, err, out)
	}
	return nil
}

// importImage copies a local Docker image into the node's containerd.
func (n *Node) importImage(tag string) error {
	save := exec.Command("docker", "save", tag)
	imp := exec.Command("ctr", "-a", n.sock, "-n", "k8s.io", "images", "import", "-")
	imp.Stdin, _ = save.StdoutPipe()
	var serr strings.Builder
	save.Stderr = &serr
	if err := save.Start(); err != nil {
		return err
	}
	out, err := imp.CombinedOutput()
	if werr := save.Wait(); werr != nil {
		return fmt.Errorf("docker save %s: %v: %s", tag, werr, serr.String())
	}
	if err != nil {
		return fmt.Errorf("ctr import %s: %v: %s", tag, err, out)
	}
	return nil
}
