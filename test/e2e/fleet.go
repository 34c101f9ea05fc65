package e2e

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cozystack/metallb-iad/test/cluster"
)

// fleet is what the restart and failover features need from a provider.
type fleet interface {
	// killLeader kills the replica of controller that holds its lease, as a
	// crash would, and returns how long a standby took to take the lease.
	killLeader(ctx context.Context, controller string) (time.Duration, error)
	// restart kills the leader and brings the replica count back.
	restart(ctx context.Context, controller string) error
	// stopAll stops every replica of controller and returns how to bring
	// them back.
	stopAll(ctx context.Context, controller string) (func() error, error)
	placeholderNamespace() string
}

func (f localFleet) stopAll(ctx context.Context, controller string) (func() error, error) {
	reps := f.p.Replicas(controller)
	for _, d := range reps {
		d.Stop(10 * time.Second)
	}
	return func() error {
		for range reps {
			if _, err := f.p.StartReplica(ctx, controller); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

type localFleet struct {
	p *LocalProvider
	k client.Client
}

func (f localFleet) placeholderNamespace() string { return cluster.DriverNamespace }

func (f localFleet) killLeader(ctx context.Context, controller string) (time.Duration, error) {
	leader, err := f.p.Leader(controller)
	if err != nil {
		return 0, err
	}
	key := client.ObjectKey{Namespace: cluster.DriverNamespace, Name: "metallb-iad-" + controller}
	lease := &coordinationv1.Lease{}
	if err := f.k.Get(ctx, key, lease); err != nil || lease.Spec.HolderIdentity == nil {
		return 0, fmt.Errorf("lease %s: %v", key, err)
	}
	old := *lease.Spec.HolderIdentity
	start := time.Now()
	leader.Kill()
	return waitNewHolder(ctx, f.k, key, old, start)
}

func (f localFleet) restart(ctx context.Context, controller string) error {
	if _, err := f.killLeader(ctx, controller); err != nil {
		return err
	}
	_, err := f.p.StartReplica(ctx, controller)
	return err
}

// waitNewHolder waits until the lease names a holder other than old.
func waitNewHolder(ctx context.Context, k client.Client, key client.ObjectKey, old string, start time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		lease := &coordinationv1.Lease{}
		if err := k.Get(ctx, key, lease); err == nil && lease.Spec.HolderIdentity != nil &&
			*lease.Spec.HolderIdentity != "" && *lease.Spec.HolderIdentity != old {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no standby took lease %s over: %w", key, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
