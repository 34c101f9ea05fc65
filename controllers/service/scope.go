package service

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
)

// scope is what one pass knows about a Service; the observe phase fills
// everything but svc, key and verdict.
type scope struct {
	svc *corev1.Service
	key types.NamespacedName
	// marks are the Service's marks as the pass read them (marks.Of);
	// claimName is the claim they ask for.
	marks     marks.Marks
	claimName string
	// claimNameProblem says why claimName names no claim (never looked up).
	claimNameProblem string
	// claim is nil when it does not exist.
	claim *iadv1alpha1.IPAddressClaim
	// addrs are the claim's addresses of served classes, bound to its uid,
	// not being deleted, one per family (OnePerFamily), by name.
	addrs   []*iadv1alpha1.IPAddress
	foreign int
	// notAdmittedBy names the class of addrs when it does not admit the
	// Service's namespace ("" when it does).
	notAdmittedBy string
	// mine are the addresses associated with the Service, by name.
	mine []*iadv1alpha1.IPAddress
	// pinnedFor are the served addresses, deleted ones included, of the
	// claim the pinned-by marker names whose IP the pin names or the
	// Service holds: a Service detached in a shared handoff still holds
	// them once they are no longer associated with it.
	pinnedFor []*iadv1alpha1.IPAddress
	// otherHolder holds otherAddress, one of addrs, by association or
	// attach grant; otherDetaching says it is on its way out.
	otherHolder    string
	otherAddress   *iadv1alpha1.IPAddress
	otherDetaching bool
	// verdict is what decideAssociation decided, handoff how
	// chooseHandoff attaches the Service.
	verdict Verdict
	handoff handoffPlan
	// waitingFor is what the pass's attach waits for; "" when it waits for
	// nothing (reportStall).
	waitingFor string
	// status collects the pass's changes to its addresses' status, each
	// address written once (report.go).
	status statusWriter
}
