package ipaddress

import (
	"net/netip"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

const phNS = "iad-system"

func address(name, ip string) *iadv1alpha1.IPAddress {
	return &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "addr-uid"},
		Spec: iadv1alpha1.IPAddressSpec{Address: ip, ClassName: "gold",
			Source: iadv1alpha1.IPAddressSource{FromClass: &iadv1alpha1.FromClassSource{}}},
	}
}

func bound(a *iadv1alpha1.IPAddress, ns, claim string) *iadv1alpha1.IPAddress {
	a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: ns, Name: claim, UID: "claim-uid"}
	return a
}

func associated(a *iadv1alpha1.IPAddress, ns, name string) *iadv1alpha1.IPAddress {
	a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: ns, Name: name}
	return a
}

// svc builds a Service; pin and ingress may be empty.
func svc(ns, name, pin, ingress string, annotations ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}}}
	if pin != "" {
		s.Annotations[marks.KeyPin] = pin
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		s.Annotations[annotations[i]] = annotations[i+1]
	}
	if ingress != "" {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ingress}}
	}
	return s
}

// sharingWorkload is Service t/web attached to claim t/c in a shared
// attachment: the driver's pin and the claim's sharing key.
func sharingWorkload(pin, ingress string) corev1.Service {
	return svc("t", "web", pin, ingress, marks.KeyPinnedBy, "c",
		marks.KeySharing, marks.Keys{}.Claim("t", "c", "claim-uid"), marks.KeySharedBy, "c")
}

// withPort gives a Service one TCP port.
func withPort(s corev1.Service, port int32) corev1.Service {
	s.Spec.Ports = []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: port}}
	return s
}

func deleting(s corev1.Service) corev1.Service {
	s.DeletionTimestamp = ptr.To(metav1.Now())
	return s
}

func svcNames(list []*corev1.Service) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// recording is a claim's allocation placeholder MetalLB assigned ip, before
// the hand-over.
func recording(claimUID, ip string) corev1.Service {
	s := svc(phNS, "alloc-ipv4-"+claimUID, "", ip)
	s.Labels = map[string]string{names.LabelPlaceholder: names.PlaceholderAllocation, names.LabelClaimUID: claimUID}
	return s
}

// TestPlanHold is one long table: the holding invariant case by case.
func TestPlanHold(t *testing.T) {
	const ip = "192.0.2.7"
	const hold = "hold-ip-192-0-2-7"
	// heldByHold is the Held condition of an address its hold holds.
	heldByHold := &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
		"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}
	type want struct {
		create  bool
		repair  []string
		delete  []string
		park    []string
		held    *heldState
		takenBy string
		// key, when set, is the sharing key the plan gives the
		// placeholders ("none" for no key).
		key string
	}
	asker := func(annotations ...string) *corev1.Service {
		s := svc("t", "web", "", "", append([]string{iadv1alpha1.ServiceClaimAnnotation, "c"}, annotations...)...)
		return &s
	}
	claimKey := marks.Keys{}.Claim("t", "c", "claim-uid")
	open := parkOpt{Pool: "parking", Open: true}
	// parked is the hold moved to the parking pool, MetalLB showing ingress.
	parked := func(ingress string) corev1.Service {
		return svc(phNS, hold, "", ingress, marks.KeyPool, "parking")
	}
	tests := []struct {
		name         string
		addr         *iadv1alpha1.IPAddress
		park         parkOpt
		placeholders []corev1.Service
		holders      []corev1.Service
		// keepKeys leaves the placeholders' sharing keys as written;
		// otherwise each placeholder without one gets the binding's.
		keepKeys bool
		// ungranted leaves the placeholders without the grant label.
		ungranted bool
		// attached is the Service associatedTo names, as the cache shows it.
		attached *corev1.Service
		// attaching is the Service the attach grant names.
		attaching *corev1.Service
		want      want
	}{
		{
			name: "fresh address: create the hold, wait for MetalLB",
			addr: address("ip-192-0-2-7", ip),
			want: want{create: true, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "hold placeholder assigned exactly the address: held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			want:         want{held: heldByHold},
		},
		{
			name:         "the claim's allocation placeholder, once labelled, counts",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, "alloc-ipv4-u1", ip, ip)},
			holders:      []corev1.Service{svc(phNS, "alloc-ipv4-u1", ip, ip)},
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/alloc-ipv4-u1"}},
		},
		{
			name:    "the claim's allocation placeholder, not handed over yet, holds: held, no hold created",
			addr:    bound(address("ip-192-0-2-7", ip), "t", "c"),
			holders: []corev1.Service{recording("claim-uid", ip)},
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/alloc-ipv4-claim-uid"}},
		},
		{
			name:     "attached meanwhile while the allocation placeholder is handed over: wait, do not release",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			holders:  []corev1.Service{recording("claim-uid", ip)},
			attached: func() *corev1.Service { s := svc("t", "web", "", ""); return &s }(),
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"MetalLB assigned 192.0.2.7 to the claim's allocation placeholder iad-system/alloc-ipv4-claim-uid, which is being handed over to this address"}},
		},
		{
			name:    "another claim's allocation placeholder holds: not ours, the hold is created",
			addr:    bound(address("ip-192-0-2-7", ip), "t", "c"),
			holders: []corev1.Service{recording("other-uid", ip)},
			want: want{create: true, key: "none", held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "placeholder not assigned yet: waiting",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "placeholder assigned another address (pin lost): repaired, not held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, "", "192.0.2.9")},
			want: want{repair: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "holding placeholder with a wrong pin is repaired and still held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, "192.0.2.7,192.0.2.8", ip)},
			holders:      []corev1.Service{svc(phNS, hold, "192.0.2.7,192.0.2.8", ip)},
			want:         want{repair: []string{phNS + "/" + hold}, held: heldByHold},
		},
		{
			name: "fresh address of a claim: the hold is created without a key",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			want: want{create: true, key: "none", held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:      "fresh address whose grant names a Service that can share: the hold is created with the key",
			addr:      bound(address("ip-192-0-2-7", ip), "t", "c"),
			attaching: asker(),
			want: want{create: true, key: claimKey, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "holding placeholder without a sharing key stays keyless and held",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys:     true,
			want:         want{held: heldByHold, key: "none"},
		},
		{
			name:         "the grant names a Service that can share: the keyless hold gets the key first",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys:     true,
			attaching:    asker(),
			want:         want{repair: []string{phNS + "/" + hold}, held: heldByHold, key: claimKey},
		},
		{
			name:         "a Service hands the address back under the binding's key: the keyless hold gets the key to share it",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc("t", "web", ip, ip, marks.KeyPinnedBy, "c", marks.KeySharing, claimKey)},
			keepKeys:     true,
			want: want{repair: []string{phNS + "/" + hold}, key: claimKey, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, which this address's binding authorizes (shared handoff)"}},
		},
		{
			name:         "the grant names a Service that cannot share (port 9/TCP: the gap handoff): the hold stays keyless",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys:     true,
			attaching:    ptr.To(withPort(*asker(), 9)),
			want:         want{held: heldByHold, key: "none"},
		},
		{
			name: "placeholder keyed for another binding (claim uid filled in since) is repaired",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip,
				marks.KeySharing, marks.Keys{}.Claim("t", "c", ""))},
			holders:  []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys: true,
			want:     want{repair: []string{phNS + "/" + hold}, held: heldByHold, key: "none"},
		},
		{
			name: "placeholder with the right key and a legacy one too is repaired",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip,
				marks.KeySharing, marks.Keys{}.Claim("t", "c", "claim-uid"), marks.KeyLegacySharing, "x")},
			holders:  []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys: true,
			want:     want{repair: []string{phNS + "/" + hold}, held: heldByHold},
		},
		{
			name:         "holding placeholder without the grant label (an older driver's) gets it and is still held",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			ungranted:    true,
			want:         want{repair: []string{phNS + "/" + hold}, held: heldByHold},
		},
		{
			name: "placeholder with the claim's key is left alone",
			addr: bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip,
				marks.KeySharing, marks.Keys{}.Claim("t", "c", "claim-uid"))},
			holders:  []corev1.Service{svc(phNS, hold, ip, ip)},
			keepKeys: true,
			want:     want{held: heldByHold},
		},
		{
			name:         "the workload shares the address with the placeholder (shared handoff): held",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders: []corev1.Service{svc(phNS, hold, ip, ip),
				svc("t", "web", ip, ip, marks.KeyPinnedBy, "c", marks.KeySharing, marks.Keys{}.Claim("t", "c", "claim-uid"))},
			want: want{held: heldByHold},
		},
		{
			name:         "surplus placeholder that does not hold the address is deleted",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ""), svc(phNS, "alloc-ipv4-u1", ip, ip)},
			holders:      []corev1.Service{svc(phNS, "alloc-ipv4-u1", ip, ip)},
			want: want{delete: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/alloc-ipv4-u1"}},
		},
		{
			name:         "only a placeholder being deleted: wait for it to go before creating",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{deleting(svc(phNS, hold, ip, ip))},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"The placeholder of 192.0.2.7 is being deleted; a new one is created once it is gone"}},
		},
		{
			name:         "another Service holds the address without authority: taken elsewhere",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc("intruder", "web", ip, ip)},
			want: want{takenBy: "intruder/web", held: &heldState{metav1.ConditionFalse, conditions.ReasonTakenElsewhere,
				"Service intruder/web holds 192.0.2.7 in MetalLB without this address's authority, so the placeholder cannot; " +
					"the driver keeps the placeholder pinned to 192.0.2.7 and never substitutes another address"}},
		},
		{
			// Only a pending claim's unpinned allocation placeholder can get
			// the address (during a gap); its claim controller gives it back.
			name:         "another claim's placeholder holding it: waiting for it to be given back",
			addr:         address("ip-192-0-2-7", ip),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc(phNS, "alloc-ipv4-other", "", ip)},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Placeholder Service iad-system/alloc-ipv4-other of another claim got 192.0.2.7 while it was unheld; " +
					"waiting for the claim controller to give it back"}},
		},
		{
			name:         "the claim's own workload still holds it while detaching: waiting, no warning",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders:      []corev1.Service{svc("t", "web", ip, ip, iadv1alpha1.ServiceClaimAnnotation, "c", marks.KeyPinnedBy, "c")},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for Service t/web, which this address's binding authorizes, to release 192.0.2.7 to the placeholder"}},
		},
		{
			name:         "the workload carrying the binding's key while detaching: waiting for MetalLB to share",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, "")},
			holders: []corev1.Service{svc("t", "web", ip, ip, marks.KeyPinnedBy, "c",
				marks.KeySharing, marks.Keys{}.Claim("t", "c", "claim-uid"), marks.KeySharedBy, "c")},
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, which this address's binding authorizes (shared handoff)"}},
		},
		{
			name:         "associated: every live placeholder is deleted, condition left alone",
			addr:         associated(address("ip-192-0-2-7", ip), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip), svc(phNS, "alloc-ipv4-u1", ip, ""), deleting(svc(phNS, "x", ip, ""))},
			want:         want{delete: []string{phNS + "/" + hold, phNS + "/alloc-ipv4-u1"}},
		},
		{
			name:         "associated, a placeholder still terminating: not released yet",
			addr:         associated(address("ip-192-0-2-7", ip), "t", "web"),
			placeholders: []corev1.Service{deleting(svc(phNS, hold, ip, ip))},
			want:         want{},
		},
		{
			name:    "associated and no placeholder: released for the workload",
			addr:    associated(address("ip-192-0-2-7", ip), "t", "web"),
			holders: []corev1.Service{svc("t", "web", ip, ip)},
			want: want{held: &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
				"No placeholder holds the address: it is released for Service t/web"}},
		},
		{
			name:         "shared attachment: the placeholder keeps holding beside the Service",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip), sharingWorkload(ip, ip)},
			attached:     ptr.To(sharingWorkload(ip, ip)),
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:         "shared attachment: a surplus placeholder that does not hold is deleted, a wrong key repaired",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip, marks.KeySharing, "old"), svc(phNS, "alloc-ipv4-u1", ip, "")},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip), sharingWorkload(ip, ip)},
			attached:     ptr.To(sharingWorkload(ip, ip)),
			want: want{repair: []string{phNS + "/" + hold}, delete: []string{phNS + "/alloc-ipv4-u1"}, held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:     "shared attachment without a placeholder, the Service holding: a hold is created to share it",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			holders:  []corev1.Service{sharingWorkload(ip, ip)},
			attached: ptr.To(sharingWorkload(ip, ip)),
			want: want{create: true, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to let placeholder Service iad-system/hold-ip-192-0-2-7 share 192.0.2.7 with Service t/web, the address is attached to (shared attachment)"}},
		},
		{
			name:     "shared attachment without a placeholder, the Service not holding yet: released, nothing created",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			attached: ptr.To(sharingWorkload(ip, "")),
			want: want{held: &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
				"No placeholder holds the address: it is released for Service t/web"}},
		},
		{
			name:         "attached Service that cannot share (port 9/TCP) although it carries the key: the placeholder is deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(withPort(sharingWorkload(ip, ""), 9)),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "attached Service with another key (the gap handoff): the placeholder is deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(svc("t", "web", ip, "", marks.KeyPinnedBy, "c")),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "attached Service being deleted: the sharing placeholder stays, nothing created or deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(deleting(svc("t", "web", ip, ip))),
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:         "attached Service let go in one write (shared): the placeholder stays and keeps its key, nothing created or deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip), svc("t", "web", "", ip)},
			attached:     ptr.To(svc("t", "web", "", ip)),
			want: want{held: &heldState{metav1.ConditionTrue, conditions.ReasonSharedWithWorkload,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7, which shares it with Service t/web, " +
					"the address is attached to (shared attachment): detaching or deleting that Service leaves the address held"}},
		},
		{
			name:         "attached Service that asks for the claim, not pinned yet (a gap handoff attaching it): the placeholder is deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     asker(),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "associated, parking open: the hold is parked, not deleted",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     asker(),
			want: want{park: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to move placeholder Service iad-system/hold-ip-192-0-2-7 from 192.0.2.7 to the parking pool parking"}},
		},
		{
			name:         "associated, parking open, a Service that could share: parked all the same (no key, no pass)",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attached:     ptr.To(withPort(svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, "c"), 80)),
			want: want{park: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to move placeholder Service iad-system/hold-ip-192-0-2-7 from 192.0.2.7 to the parking pool parking"}},
		},
		{
			name:         "associated, parked, MetalLB has not moved it yet: not released",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked(ip)},
			holders:      []corev1.Service{parked(ip)},
			attached:     asker(),
			want: want{held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to move placeholder Service iad-system/hold-ip-192-0-2-7 from 192.0.2.7 to the parking pool parking"}},
		},
		{
			name:         "associated, parked and moved: released for the workload",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			attached:     asker(),
			want: want{held: &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
				"No placeholder holds the address: it is released for Service t/web"}},
		},
		{
			name:         "associated, parking closed meanwhile: a parked placeholder is deleted as in the gap handoff",
			addr:         associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			park:         parkOpt{Pool: "parking"},
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			attached:     asker(),
			want:         want{delete: []string{phNS + "/" + hold}},
		},
		{
			name:         "detached, parked, the Service still holding: nothing pinned back yet",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			holders:      []corev1.Service{svc("t", "web", "", ip, marks.KeyPinnedBy, "c")},
			want: want{key: "none", held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for Service t/web, which this address's binding authorizes, to release 192.0.2.7 to the placeholder"}},
		},
		{
			name:         "detached, parked, nobody holding: pinned back without a key",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{parked("240.0.0.1")},
			want: want{key: "none", repair: []string{phNS + "/" + hold}, held: &heldState{metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB,
				"Waiting for MetalLB to assign 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:         "attach grant for a Service that could share, parking open: the hold gets no key",
			addr:         bound(address("ip-192-0-2-7", ip), "t", "c"),
			park:         open,
			keepKeys:     true,
			placeholders: []corev1.Service{svc(phNS, hold, ip, ip)},
			holders:      []corev1.Service{svc(phNS, hold, ip, ip)},
			attaching:    ptr.To(withPort(svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, "c"), 80)),
			want: want{key: "none", held: &heldState{metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder,
				"MetalLB assigned 192.0.2.7 to placeholder Service iad-system/hold-ip-192-0-2-7"}},
		},
		{
			name:     "attached Service let go in one write (gap): no hold yet, until the association is cleared",
			addr:     associated(bound(address("ip-192-0-2-7", ip), "t", "c"), "t", "web"),
			holders:  []corev1.Service{svc("t", "web", "", ip)},
			attached: ptr.To(svc("t", "web", "", ip)),
			want: want{held: &heldState{metav1.ConditionFalse, conditions.ReasonReleasedForWorkload,
				"No placeholder holds the address: it is released for Service t/web"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ungranted {
				for i := range tt.placeholders {
					marks.Edit(&tt.placeholders[i], func(m *marks.Marks) { m.Grant = tt.addr.Spec.ClassName })
				}
			}
			if !tt.keepKeys {
				for i := range tt.placeholders {
					if _, ok := tt.placeholders[i].Annotations[marks.KeySharing]; !ok {
						tt.placeholders[i].Annotations[marks.KeySharing] = marks.Keys{}.Of(tt.addr)
					}
				}
			}
			p := planHold(tt.addr, ip, marks.Keys{}.Of(tt.addr), phNS, tt.park, tt.placeholders, tt.holders, tt.attached, tt.attaching)
			switch tt.want.key {
			case "":
			case "none":
				assert.Empty(t, p.Key, "key")
			default:
				assert.Equal(t, tt.want.key, p.Key, "key")
			}
			assert.Equal(t, tt.want.create, p.Create, "create")
			assert.Equal(t, tt.want.repair, svcNames(p.Repair), "repair")
			assert.Equal(t, tt.want.delete, svcNames(p.Delete), "delete")
			assert.Equal(t, tt.want.park, svcNames(p.Park), "park")
			assert.Equal(t, tt.want.held, p.Held, "held")
			if tt.want.takenBy == "" {
				assert.Nil(t, p.TakenBy)
			} else if assert.NotNil(t, p.TakenBy) {
				assert.Equal(t, tt.want.takenBy, p.TakenBy.Namespace+"/"+p.TakenBy.Name)
			}
		})
	}
}

func TestUnauthorizedHolders(t *testing.T) {
	const ip = "192.0.2.7"
	a := associated(bound(address("a", ip), "t", "c"), "t", "web")
	placeholder := svc(phNS, "hold-a", "", ip)
	placeholder.Labels = map[string]string{names.LabelPlaceholder: names.PlaceholderHold}
	forged := svc("intruder", "forged", "", ip)
	forged.Labels = map[string]string{names.LabelPlaceholder: names.PlaceholderHold}
	holders := []corev1.Service{
		placeholder,
		svc("t", "web", "", ip),
		svc("t", "api", "", ip, iadv1alpha1.ServiceClaimAnnotation, "c", marks.KeyPinnedBy, "c"),
		svc("intruder", "web", ip, ip),
		svc("t", "plain", "", ip),
		// Not the driver's: the same rule as the Service controller's
		// conflict detection (marks.Exempt), or the address would flip
		// between Conflict and recovery.
		svc(phNS, "unlabelled-in-the-placeholder-namespace", "", ip),
		forged,
	}
	assert.Equal(t, []string{"intruder/web", "t/plain", phNS + "/unlabelled-in-the-placeholder-namespace", "intruder/forged"},
		svcNames(unauthorizedHolders(a, holders, phNS)))
	assert.Empty(t, unauthorizedHolders(a, holders[:3], phNS))
}

func TestHandBackPhase(t *testing.T) {
	assert.Equal(t, iadv1alpha1.AddressBound, handBackPhase(bindingStands))
	assert.Equal(t, iadv1alpha1.AddressAvailable, handBackPhase(bindingNone))
	assert.Equal(t, iadv1alpha1.AddressAvailable, handBackPhase(bindingBroken))
}

func TestSharesSoon(t *testing.T) {
	a := bound(address("ip-192-0-2-7", "192.0.2.7"), "t", "c")
	asker := func(edit func(*corev1.Service)) *corev1.Service {
		s := svc("t", "web", "", "", iadv1alpha1.ServiceClaimAnnotation, " c ")
		edit(&s)
		return &s
	}
	for _, tt := range []struct {
		name string
		svc  *corev1.Service
		want bool
	}{
		{"a Service asking for the claim that can share", asker(func(*corev1.Service) {}), true},
		{"no Service", nil, false},
		{"being deleted", asker(func(s *corev1.Service) { s.DeletionTimestamp = ptr.To(metav1.Now()) }), false},
		{"asking for another claim", asker(func(s *corev1.Service) { s.Annotations[iadv1alpha1.ServiceClaimAnnotation] = "other" }), false},
		{"in another namespace", asker(func(s *corev1.Service) { s.Namespace = "u" }), false},
		{"with a sharing key of its own", asker(func(s *corev1.Service) { s.Annotations[marks.KeySharing] = "mine" }), false},
		{"with a pin of its own", asker(func(s *corev1.Service) { s.Annotations[marks.KeyPin] = "192.0.2.7" }), false},
		{"on the placeholder's port", asker(func(s *corev1.Service) { *s = withPort(*s, 9) }), false},
		{"with externalTrafficPolicy Local", asker(func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}), false},
	} {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, sharesSoon(a, tt.svc)) })
	}
	assert.False(t, sharesSoon(address("ip-192-0-2-7", "192.0.2.7"), asker(func(*corev1.Service) {})), "an address bound to no claim")
}

func TestRenderHold(t *testing.T) {
	for _, tt := range []struct {
		name, ip string
		family   corev1.IPFamily
	}{
		{"ip-203-0-113-7", "203.0.113.7", corev1.IPv4Protocol},
		{"ip6-2001-0db8-0000-0000-0000-0000-0000-0007", "2001:db8::7", corev1.IPv6Protocol},
		{"static.example.org", "203.0.113.8", corev1.IPv4Protocol},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := address(tt.name, tt.ip)
			s := renderHold(phNS, a, netip.MustParseAddr(tt.ip), "")
			assert.Equal(t, phNS, s.Namespace)
			assert.Equal(t, names.HoldPlaceholderName(tt.name), s.Name)
			assert.Empty(t, validation.IsDNS1035Label(s.Name))
			assert.Equal(t, map[string]string{
				names.LabelPlaceholder: names.PlaceholderHold,
				names.LabelAddress:     tt.name,
				marks.LabelGrant:       a.Spec.ClassName,
			}, s.Labels)
			assert.Equal(t, map[string]string{
				marks.KeyPool:         "iad-gold",
				marks.KeyPin:          tt.ip,
				names.AnnotationClass: "gold",
			}, s.Annotations, "a hold no workload shares carries no sharing key")
			key := marks.Keys{}.Claim("shop", "web-ip", "claim-uid")
			b := renderHold(phNS, bound(address(tt.name, tt.ip), "shop", "web-ip"), netip.MustParseAddr(tt.ip), key)
			assert.Equal(t, key, b.Annotations[marks.KeySharing], "a hold made for a shared handoff carries the key")
			require.Len(t, s.OwnerReferences, 1)
			o := s.OwnerReferences[0]
			assert.Equal(t, "local.sdn.cozystack.io/v1alpha1", o.APIVersion)
			assert.Equal(t, "IPAddress", o.Kind)
			assert.Equal(t, tt.name, o.Name)
			assert.EqualValues(t, "addr-uid", o.UID)
			assert.False(t, *o.Controller)
			assert.False(t, *o.BlockOwnerDeletion)
			assert.Equal(t, corev1.ServiceTypeLoadBalancer, s.Spec.Type)
			assert.Empty(t, s.Spec.Selector)
			assert.False(t, *s.Spec.AllocateLoadBalancerNodePorts)
			assert.Equal(t, []corev1.IPFamily{tt.family}, s.Spec.IPFamilies)
			assert.Equal(t, corev1.IPFamilyPolicySingleStack, *s.Spec.IPFamilyPolicy)
			require.Len(t, s.Spec.Ports, 1)
			assert.Equal(t, int32(9), s.Spec.Ports[0].Port)
		})
	}
}

func TestServed(t *testing.T) {
	ours := &iadv1alpha1.IPAddressClass{Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: names.Provisioner}}
	theirs := &iadv1alpha1.IPAddressClass{Spec: iadv1alpha1.IPAddressClassSpec{Provisioner: "example.com/other"}}
	plain := address("a", "192.0.2.7")
	withFinalizer := address("a", "192.0.2.7")
	withFinalizer.Finalizers = []string{iadv1alpha1.AddressProtectionFinalizer, names.Finalizer}

	assert.True(t, marks.Served(plain, ours), "class names us")
	assert.False(t, marks.Served(plain, theirs), "class names another driver")
	assert.False(t, marks.Served(withFinalizer, theirs), "class names another driver, even with our finalizer")
	assert.False(t, marks.Served(plain, nil), "class gone, never ours")
	assert.True(t, marks.Served(withFinalizer, nil), "class gone, still carries our finalizer")
}

// written is the annotations m writes on a copy of svc; nil when it
// writes nothing.
func written(svc *corev1.Service, m marks.Marks) map[string]string {
	if !m.Changed() {
		return nil
	}
	c := svc.DeepCopy()
	m.Apply(c)
	return c.Annotations
}

func TestReleaseStep(t *testing.T) {
	const ip = "192.0.2.7"
	a := address("ip-192-0-2-7", ip)
	a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: "t", Name: "c"}
	svc := func(ann map[string]string, ingress ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", Annotations: ann},
			Spec: corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
		for _, in := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in})
		}
		return s
	}
	pinned := map[string]string{marks.KeyPin: ip, marks.KeyPinnedBy: "c",
		marks.KeySharing: "k", marks.KeySharedBy: "c", "keep": "me"}
	releasing := map[string]string{marks.KeyPin: "::", marks.KeyPinnedBy: "c", "keep": "me"}
	deleting := svc(pinned, ip)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	tests := []struct {
		name string
		svc  *corev1.Service
		want releaseAction
		ann  map[string]string
	}{
		{"holds the IP: the release pin, the key goes, the marker stays", svc(pinned, ip), releasePin, releasing},
		{"release pin written, MetalLB has not let go yet", svc(releasing, ip), releaseWait, nil},
		{"release pin, ingress empty: pin and marker go", svc(releasing), releaseWithdraw, map[string]string{"keep": "me"}},
		{"release pin, another address still shown", svc(releasing, "192.0.2.8"), releaseWait, nil},
		{"pinned, not holding yet: the IP leaves the pin", svc(pinned), releaseDropIP, map[string]string{"keep": "me"}},
		{"hand-written pin: never touched", svc(map[string]string{marks.KeyPin: ip}, ip), releaseNone, nil},
		{"marker of another claim, not pinned to the IP", svc(map[string]string{marks.KeyPin: "::", marks.KeyPinnedBy: "x"}), releaseNone, nil},
		{"being deleted: its deletion frees the IP", deleting, releaseNone, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, m := releaseStep(tt.svc, a, ip)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.ann, written(tt.svc, m))
		})
	}

	// A Service let go in one write (marks.LetGo) is waited for while it
	// holds the IP, and left alone once MetalLB has taken it back.
	associated := associated(a.DeepCopy(), "t", "web")
	for _, tt := range []struct {
		name string
		svc  *corev1.Service
		want releaseAction
	}{
		{"let go, still holding: wait", svc(map[string]string{"keep": "me"}, ip), releaseWait},
		{"let go, MetalLB took it back: nothing to do", svc(map[string]string{"keep": "me"}), releaseNone},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, m := releaseStep(tt.svc, associated, ip)
			assert.Equal(t, tt.want, got)
			assert.False(t, m.Changed(), "nothing to write")
		})
	}
}

func TestAddressState(t *testing.T) {
	withHeld := func(a *iadv1alpha1.IPAddress, status metav1.ConditionStatus, reason string) *iadv1alpha1.IPAddress {
		conditions.Set(&a.Status.Conditions, conditions.Held, status, reason, "", 1)
		return a
	}
	conflict := address("a", "192.0.2.7")
	conflict.Status.Phase = iadv1alpha1.AddressConflict
	assert.Equal(t, stateConflict, addressState(conflict))
	lost := address("a", "192.0.2.7")
	lost.Status.Phase = iadv1alpha1.AddressLost
	assert.Equal(t, stateLost, addressState(lost))
	assert.Equal(t, stateAssociated, addressState(associated(address("a", "192.0.2.7"), "t", "web")))
	assert.Equal(t, stateHeld, addressState(withHeld(address("a", "192.0.2.7"), metav1.ConditionTrue, conditions.ReasonHeldByPlaceholder)))
	assert.Equal(t, stateConflict, addressState(withHeld(address("a", "192.0.2.7"), metav1.ConditionFalse, conditions.ReasonTakenElsewhere)))
	assert.Equal(t, stateWaiting, addressState(withHeld(address("a", "192.0.2.7"), metav1.ConditionUnknown, conditions.ReasonWaitingForMetalLB)))
	assert.Equal(t, stateWaiting, addressState(address("a", "192.0.2.7")))
}

func TestConflictSettling(t *testing.T) {
	now := time.Now()
	a := address("a", "192.0.2.7")
	assert.Zero(t, conflictSettling(a, now), "no Conflict condition")
	a.Status.Conditions = []metav1.Condition{{Type: conditions.Conflict, Status: metav1.ConditionTrue,
		Reason: conditions.ReasonUnauthorizedHolder, LastTransitionTime: metav1.NewTime(now.Add(-500 * time.Millisecond))}}
	assert.InDelta(t, 1500*time.Millisecond, conflictSettling(a, now), float64(time.Millisecond))
	a.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Minute))
	assert.Zero(t, conflictSettling(a, now), "settled long ago")
	a.Status.Conditions[0].Status = metav1.ConditionFalse
	a.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now)
	assert.Zero(t, conflictSettling(a, now), "condition False")
}

func TestFirstReportDeferral(t *testing.T) {
	now := time.Now()
	held := []metav1.Condition{{Type: conditions.Held, Status: metav1.ConditionTrue, Reason: conditions.ReasonHeldByPlaceholder}}
	for _, tc := range []struct {
		name      string
		age       time.Duration
		orig      func(*iadv1alpha1.IPAddress)
		nextPhase iadv1alpha1.IPAddressPhase
		want      time.Duration
	}{
		{name: "new, no phase yet: wait for the core", age: 2 * time.Second, want: 8 * time.Second},
		{name: "the core set the phase", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) { a.Status.Phase = iadv1alpha1.AddressBound }},
		{name: "not the first report", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) { a.Status.Conditions = held }},
		{name: "associated", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) {
			a.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "ns", Name: "web"}
		}},
		{name: "the driver sets a phase of its own", age: time.Second, nextPhase: iadv1alpha1.AddressLost},
		{name: "being deleted", age: time.Second, orig: func(a *iadv1alpha1.IPAddress) { a.DeletionTimestamp = &metav1.Time{Time: now} }},
		{name: "the core is slow or down: the window has passed", age: firstReportWindow + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := address("a", "192.0.2.7")
			orig.CreationTimestamp = metav1.NewTime(now.Add(-tc.age))
			if tc.orig != nil {
				tc.orig(orig)
			}
			next := orig.DeepCopy()
			next.Status.Conditions = held
			next.Status.Phase = tc.nextPhase
			assert.InDelta(t, tc.want, firstReportDeferral(orig, next, now), float64(time.Millisecond))
		})
	}
}

func TestAddressStatesGauge(t *testing.T) {
	var st addressStates
	g := func(class, state string) float64 {
		var m dto.Metric
		require.NoError(t, addressesGauge.WithLabelValues(class, state).Write(&m))
		return m.GetGauge().GetValue()
	}
	st.set("a", "metrics-test", stateWaiting)
	st.set("b", "metrics-test", stateWaiting)
	assert.Equal(t, 2.0, g("metrics-test", stateWaiting))
	st.set("a", "metrics-test", stateHeld)
	st.set("a", "metrics-test", stateHeld)
	assert.Equal(t, 1.0, g("metrics-test", stateWaiting))
	assert.Equal(t, 1.0, g("metrics-test", stateHeld))
	st.forget("a")
	st.forget("a")
	st.forget("never-seen")
	assert.Equal(t, 0.0, g("metrics-test", stateHeld))
	assert.Equal(t, 1.0, g("metrics-test", stateWaiting))
}

// annotated is s with annotations.
func annotated(s corev1.Service, annotations map[string]string) corev1.Service {
	s.Annotations = annotations
	return s
}

func TestGrantState(t *testing.T) {
	a := &iadv1alpha1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-192-0-2-1"},
		Spec: iadv1alpha1.IPAddressSpec{Address: "192.0.2.1", ClassName: "public",
			ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "shop", Name: "web-ip"}},
		Status: iadv1alpha1.IPAddressStatus{AssociatedTo: &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "web"}},
	}
	svc := func(ns, name string, granted string) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if granted != "" {
			s.Labels = map[string]string{marks.LabelGrant: granted}
		}
		return s
	}
	tests := []struct {
		name    string
		holders []corev1.Service
		want    metav1.ConditionStatus
		missing string
	}{
		{"nobody holds it", nil, metav1.ConditionTrue, ""},
		{"granted placeholder and workload", []corev1.Service{svc("iad", "hold", "public"), svc("shop", "web", "public")}, metav1.ConditionTrue, ""},
		{"ungranted placeholder", []corev1.Service{svc("iad", "hold", "")}, metav1.ConditionFalse, "iad/hold"},
		{"workload granted another class", []corev1.Service{svc("shop", "web", "private")}, metav1.ConditionFalse, "shop/web"},
		{"a holder without authority is not waited for", []corev1.Service{svc("rogue", "grab", "")}, metav1.ConditionTrue, ""},
		{"a workload released by withdrawing its grant is not waited for",
			[]corev1.Service{annotated(svc("shop", "old", ""), map[string]string{marks.KeyPinnedBy: "web-ip"})}, metav1.ConditionTrue, ""},
		{"nor one released with the release pin",
			[]corev1.Service{annotated(svc("shop", "old", ""), map[string]string{marks.KeyPinnedBy: "web-ip", marks.KeyPin: "::"})}, metav1.ConditionTrue, ""},
		{"nor the workload let go in one write (no marker, no grant, still associated)",
			[]corev1.Service{svc("shop", "web", "")}, metav1.ConditionTrue, ""},
		{"a pinned workload without the grant is waited for",
			[]corev1.Service{annotated(svc("shop", "old", ""), map[string]string{marks.KeyPinnedBy: "web-ip", marks.KeyPin: "192.0.2.1"})}, metav1.ConditionFalse, "shop/old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := grantState(a, tt.holders, "iad")
			assert.Equal(t, tt.want, got.Status)
			if tt.missing != "" {
				assert.Contains(t, got.Message, tt.missing)
				assert.Equal(t, conditions.ReasonHolderNotGranted, got.Reason)
			}
		})
	}
}
