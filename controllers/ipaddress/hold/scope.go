package hold

import (
	"context"
	"net/netip"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/index"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// Scope is one pass's hold of one address: what the ipaddress controller's
// pass found before the hold (the address, its IP, sharing key and pool),
// what the hold planned on, and the Events both leave for after the status
// write. The ipaddress controller's scope embeds it.
type Scope struct {
	// Addr is the address; the phases edit its status in memory and the
	// ipaddress controller writes it once.
	Addr *iadv1alpha1.IPAddress
	// IP is spec.address, parsed.
	IP netip.Addr
	// Key is the address's sharing key (sharingkey.Keys.Of); KeyBefore its key
	// under the secret held before a rotation, "" when none. EnforceHold
	// sets Key to the key the hold's pair shares.
	Key, KeyBefore string
	// Pool is the class's MetalLB pool, nil when it does not exist.
	Pool *metallbv1beta1.IPAddressPool
	// AfterPatch are Events about status changes, recorded once the status
	// is written.
	AfterPatch []Event

	holders       []corev1.Service
	holdersLoaded bool
	// held is what EnforceHold planned and applied on, nil when it did not
	// get that far; CreateHold and ClearStale act on the rest of its plan.
	held *heldPlan
}

// Event is an Event a pass records only once its status write has landed:
// it tells of a change that write makes.
type Event struct {
	Object                runtime.Object
	Type, Reason, Message string
}

// heldPlan is a hold plan with the view it was planned on.
type heldPlan struct {
	view *holdView
	plan holdPlan
}

// CreatesHold reports whether the hold creates its placeholder after the
// status write (CreateHold), which then rides on that write's lock.
func (s *Scope) CreatesHold() bool { return s.held != nil && s.held.plan.Create }

// Holders returns, once per pass, the Services MetalLB assigned the address.
func (k *Keeper) Holders(ctx context.Context, s *Scope) ([]corev1.Service, error) {
	if s.holdersLoaded {
		return s.holders, nil
	}
	var list corev1.ServiceList
	if err := k.List(ctx, &list, client.MatchingFields{index.ServiceByIngressIP: s.IP.String()}); err != nil {
		return nil, err
	}
	s.holders, s.holdersLoaded = list.Items, true
	return s.holders, nil
}

// AttachedService returns, from the cache, the Service associatedTo names;
// nil when there is none or the cache does not have it.
func (k *Keeper) AttachedService(ctx context.Context, s *Scope) (*corev1.Service, error) {
	w := s.Addr.Status.AssociatedTo
	if w == nil || w.Kind != "Service" {
		return nil, nil
	}
	return k.cachedService(ctx, w.Namespace, w.Name)
}

// attachingService returns, from the cache, the Service the attach grant
// names while the address is attached to none; nil when there is none.
func (k *Keeper) attachingService(ctx context.Context, s *Scope) (*corev1.Service, error) {
	svc, ok := marks.AttachingService(s.Addr)
	if s.Addr.Status.AssociatedTo != nil || !ok || svc.Namespace == "" || svc.Name == "" {
		return nil, nil
	}
	return k.cachedService(ctx, svc.Namespace, svc.Name)
}

func (k *Keeper) cachedService(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	switch err := k.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, svc); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return svc, nil
}

// CachedPlaceholders lists the address's own placeholders from the cache.
func (k *Keeper) CachedPlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := k.List(ctx, &list, client.InNamespace(k.PlaceholderNamespace),
		client.MatchingFields{index.PlaceholderByAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}

// LivePlaceholders lists the same from the API server.
func (k *Keeper) LivePlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := k.APIReader.List(ctx, &list, client.InNamespace(k.PlaceholderNamespace),
		client.MatchingLabels{marks.LabelAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}
