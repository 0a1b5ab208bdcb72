package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/images"
)

// fakeEnvs is an environment manager that must not be reached: argument
// errors are found before it is used.
type fakeEnvs struct{ t *testing.T }

func (f fakeEnvs) Active() images.Environment { return images.Environment{} }
func (f fakeEnvs) Canonical(specs []string) ([]string, error) {
	reqs, err := images.ParseRequirements(specs, images.RequirementPolicy{})
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.String()
	}
	return out, err
}
func (f fakeEnvs) Install(context.Context, []string) (images.InstallResult, error) {
	f.t.Error("Install reached with bad arguments")
	return images.InstallResult{}, errors.New("unexpected install")
}
func (f fakeEnvs) Installed(context.Context, []string) ([]images.PackageStatus, error) {
	f.t.Error("Installed reached with bad arguments")
	return nil, errors.New("unexpected check")
}
func (f fakeEnvs) Configure(context.Context, images.Environment) (images.Environment, error) {
	f.t.Error("Configure reached with bad arguments")
	return images.Environment{}, errors.New("unexpected configure")
}

// notReady is a Ready that fails as a runtime image build would, and
// counts how often it was asked.
func notReady(calls *int) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		return errors.New("building the runtime image failed")
	}
}

// TestBadArgumentsBeforeReadiness: bad arguments are refused, naming what
// is wrong, before the tool waits for the runtime (which may build an
// image for minutes, or fail and hide the argument error behind an
// "internal failure").
func TestBadArgumentsBeforeReadiness(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	h.cfg.Envs, h.cfg.MaxInputBytes = fakeEnvs{t}, 4
	ready := 0
	h.cfg.Ready = notReady(&ready)
	ctx := t.Context()
	_, _, err := h.installDependencies(ctx, nil, InstallDependenciesInput{Packages: []string{"requests", "--index-url=http://evil"}})
	wantErr(t, "install_dependencies with a pip option", err, "pip options are not allowed")
	_, _, err = h.installPackage(ctx, nil, InstallPackageInput{Package: "-r requirements.txt"})
	wantErr(t, "install_package with -r", err, "pip options are not allowed")
	_, _, err = h.checkInstalledPackages(ctx, nil, CheckInstalledPackagesInput{Packages: []string{"numpy", "rm -rf /"}})
	wantErr(t, "check_installed_packages with a path", err, "not allowed")
	_, _, err = h.configureEnvironment(ctx, nil, ConfigureEnvironmentInput{Type: "pyenv"})
	wantErr(t, "configure_environment with an unknown type", err, `type "pyenv"`)
	_, _, err = h.executeCode(ctx, nil, ExecuteCodeInput{Code: "print(1)", TimeoutS: -1})
	wantErr(t, "execute_code with a negative timeout", err, "timeout_s")
	_, _, err = h.executeCode(ctx, nil, ExecuteCodeInput{Code: "print(1)", Input: "too long", SessionID: "s1"})
	wantErr(t, "execute_code with oversized input", err, "input is 8 bytes")
	if ready != 0 {
		t.Errorf("Ready was called %d times for calls with bad arguments; want 0", ready)
	}
	if entries, err := os.ReadDir(h.cfg.Storage.Path()); err != nil || len(entries) != 0 {
		t.Errorf("refused calls left %d entries in code storage (%v); want none", len(entries), err)
	}
}

// TestExecuteCodeFileBadSession: an invalid session_id is named as such,
// not reported as an internal failure.
func TestExecuteCodeFileBadSession(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	h.cfg.Ready = func(context.Context) error { return nil }
	putFile(t, h, "prog.py", []byte("print(1)\n"))
	_, _, err := h.executeCodeFile(t.Context(), nil, ExecuteCodeFileInput{FilePath: "prog.py", SessionID: "../other"})
	wantErr(t, "execute_code_file with a bad session_id", err, "invalid session_id")
	if err != nil && strings.Contains(err.Error(), "internal failure") {
		t.Errorf("a bad session_id was reported as an internal failure: %v", err)
	}
}

// TestNotReadyMessage: when the runtime cannot be made ready, every tool
// that needs it says that (with an error id), not that it "could not run".
func TestNotReadyMessage(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	h.cfg.Envs = fakeEnvs{t}
	ready := 0
	h.cfg.Ready = notReady(&ready)
	ctx := t.Context()
	var errs []error
	_, _, err := h.installDependencies(ctx, nil, InstallDependenciesInput{Packages: []string{"requests"}})
	errs = append(errs, err)
	_, _, err = h.checkInstalledPackages(ctx, nil, CheckInstalledPackagesInput{Packages: []string{"numpy"}})
	errs = append(errs, err)
	_, _, err = h.configureEnvironment(ctx, nil, ConfigureEnvironmentInput{Type: "venv"})
	errs = append(errs, err)
	_, _, err = h.getEnvironmentConfig(ctx, nil, struct{}{})
	errs = append(errs, err)
	for i, err := range errs {
		wantErr(t, fmt.Sprintf("call %d while not ready", i), err, "could not prepare the Python environment")
	}
}
