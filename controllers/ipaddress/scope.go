package ipaddress

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

// scope carries what one pass fetched and what it changes. Reconcile builds
// it from the address; the first phases fill in the class and the IP.
type scope struct {
	// addr is the address; the phases edit its status in memory and
	// reportStatus writes it once, on orig, the address as read.
	addr, orig *iadv1alpha1.IPAddress
	// ip is spec.address, parsed (parseAddress).
	ip netip.Addr
	// key is the address's sharing key (marks.Keys.Of); keyBefore its key
	// under the secret held before a rotation, "" when none.
	key, keyBefore string
	// class is the address's class (loadClass), nil when it does not exist.
	class *iadv1alpha1.IPAddressClass
	// pool is the class's MetalLB pool (detectLost), nil when it does not
	// exist.
	pool *metallbv1beta1.IPAddressPool

	holders       []corev1.Service
	holdersLoaded bool
	// hold is what enforceHold planned and applied on, nil when it did not
	// get that far; createHold and clearStale act on the rest of its plan.
	hold *heldPlan

	// afterPatch are Events about status changes, recorded once the status
	// is written.
	afterPatch []pendingEvent
	// lostTold is set when afterPatch holds the address's AddressLost
	// Warnings: once they are handed to the recorder, the address counts
	// as told (lostAnnounced).
	lostTold bool
}

// heldPlan is a hold plan with the view it was planned on.
type heldPlan struct {
	view *holdView
	plan holdPlan
}

type pendingEvent struct {
	obj                    runtime.Object
	eventType, reason, msg string
}

// rebase makes the address as written in the middle of a pass the base of
// the next status patch.
func (s *scope) rebase() {
	s.orig = s.addr.DeepCopy()
	s.afterPatch = nil
	s.lostTold = false
}

// holders returns, once per pass, the Services MetalLB assigned the address.
func (r *Reconciler) holders(ctx context.Context, s *scope) ([]corev1.Service, error) {
	if s.holdersLoaded {
		return s.holders, nil
	}
	var list corev1.ServiceList
	if err := r.List(ctx, &list, client.MatchingFields{index.ServiceByIngressIP: s.ip.String()}); err != nil {
		return nil, err
	}
	s.holders, s.holdersLoaded = list.Items, true
	return s.holders, nil
}

// attachedService returns, from the cache, the Service associatedTo names;
// nil when there is none or the cache does not have it.
func (r *Reconciler) attachedService(ctx context.Context, s *scope) (*corev1.Service, error) {
	w := s.addr.Status.AssociatedTo
	if w == nil || w.Kind != "Service" {
		return nil, nil
	}
	return r.cachedService(ctx, w.Namespace, w.Name)
}

// attachingService returns, from the cache, the Service the attach grant
// names while the address is attached to none; nil when there is none.
func (r *Reconciler) attachingService(ctx context.Context, s *scope) (*corev1.Service, error) {
	svc, ok := marks.AttachingService(s.addr)
	if s.addr.Status.AssociatedTo != nil || !ok || svc.Namespace == "" || svc.Name == "" {
		return nil, nil
	}
	return r.cachedService(ctx, svc.Namespace, svc.Name)
}

func (r *Reconciler) cachedService(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, svc); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return svc, nil
}

// cachedPlaceholders lists the address's own placeholders from the cache.
func (r *Reconciler) cachedPlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := r.List(ctx, &list, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingFields{index.PlaceholderByAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}

// livePlaceholders lists the same from the API server.
func (r *Reconciler) livePlaceholders(ctx context.Context, a *iadv1alpha1.IPAddress) ([]corev1.Service, error) {
	var list corev1.ServiceList
	err := r.APIReader.List(ctx, &list, client.InNamespace(r.PlaceholderNamespace),
		client.MatchingLabels{marks.LabelAddress: a.Name})
	return ownPlaceholders(a, list.Items), err
}
