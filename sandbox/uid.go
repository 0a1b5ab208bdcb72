package sandbox

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
)

// LabelUID carries a container's own uid, when it has one.
const LabelUID = contract.LabelUID

// uidDraws bounds how often a container start draws another uid because a
// live container on the daemon already had the one drawn.
const uidDraws = 3

// errUIDTaken: another container on the daemon has the uid just drawn.
var errUIDTaken = errors.New("another container on the daemon has the same uid")

// OwnUIDs reports whether each container runs as a uid of its own (see
// Config.SharedUID).
func (s *Sandbox) OwnUIDs() bool { return s.ownUIDs }

// anyUIDs reports whether b's containers may run as any uid (anyUID).
func anyUIDs(b Backend) bool {
	a, ok := b.(anyUID)
	return ok && a.AnyUID()
}

// newUser is the "uid:gid" a new container runs as: User, or with uids of
// their own a uid drawn at random from contract's range, in User's group.
func (s *Sandbox) newUser() string {
	if !s.ownUIDs {
		return s.cfg.User
	}
	_, gid, _ := strings.Cut(s.cfg.User, ":")
	return strconv.Itoa(contract.SandboxUIDBase+rand.IntN(contract.SandboxUIDCount)) + ":" + gid
}

// labels are the labels of plan's container with role: its owner's, and
// its own uid when it has one.
func (s *Sandbox) labels(role string, plan Plan) map[string]string {
	l := s.owner.Labels(role)
	if s.ownUIDs {
		l[LabelUID], _, _ = strings.Cut(plan.User, ":")
	}
	return l
}

// start starts plan's container (its command is the runner) with a name of
// role and waits until it is ready. With uids of their own it makes sure,
// once the container exists (beside the runner's start), that no other
// container on the daemon has the same uid (another server may have drawn
// it at the same moment): if one has, the new container is removed,
// before any program reached it, and the start draws again. Two that
// collide both draw again, so two never keep the same uid.
func (s *Sandbox) start(ctx context.Context, plan Plan, role string) (*conn, error) {
	for draw := 1; ; draw++ {
		cfg, host := ContainerConfig(plan)
		uid := plan.Labels[LabelUID]
		var check func(context.Context, string) error
		if uid != "" {
			check = func(ctx context.Context, id string) error { return s.uidAlone(ctx, id, uid) }
		}
		c, err := s.dial(ctx, engine.Spec{Name: s.owner.ContainerName(role), Config: cfg, Host: host}, plan.Runner, plan.LearnRunner, check)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errUIDTaken) || draw == uidDraws {
			return nil, err
		}
		s.log.Info("uid taken by another container: drawing another", "uid", uid)
		plan.User, plan.Labels = s.newUser(), maps.Clone(plan.Labels)
		plan.Labels[LabelUID], _, _ = strings.Cut(plan.User, ":")
	}
}

// uidAlone checks that no container on the daemon (no pod in the
// namespace) but id has uid.
func (s *Sandbox) uidAlone(ctx context.Context, id, uid string) error {
	list, err := s.eng.List(ctx, map[string]string{LabelUID: uid})
	if err != nil {
		return s.explain(err)
	}
	for _, o := range list {
		if o.ID != id {
			return errUIDTaken
		}
	}
	return nil
}
