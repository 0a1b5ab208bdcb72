package app

import (
	"context"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/sandbox"
	"github.com/pybox-dev/pybox/tools"
)

// Observer counts what one owner's server does (serve --http's metrics).
type Observer interface {
	// Run records a run: its path (warm, cold, session), result and error.
	Run(path string, res sandbox.Result, err error)
	// Install records an install's result: new, cached or failed.
	Install(result string)
}

// observeRun records a run of a's tenant (tools.Config.Observe).
func (a *App) observeRun(path string, res sandbox.Result, err error) {
	if a.observer != nil {
		a.observer.Run(path, res, err)
	}
}

// observedEnvs is a's environment manager, its installs counted.
func (a *App) observedEnvs() tools.Environments {
	if a.observer == nil {
		return a.Envs
	}
	return countedEnvs{a.Envs, a.observer}
}

type countedEnvs struct {
	*images.Manager
	o Observer
}

func (e countedEnvs) Install(ctx context.Context, specs []string) (images.InstallResult, error) {
	res, err := e.Manager.Install(ctx, specs)
	result := "new"
	switch {
	case err != nil:
		result = "failed"
	case res.Cached:
		result = "cached"
	}
	e.o.Install(result)
	return res, err
}
