package stale

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
)

func TestBlockedService(t *testing.T) {
	const ip = "10.0.0.2"
	svc := func(ns, name, pin string, holds bool) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}}}
		if pin != "" {
			s.Annotations[marks.KeyPin] = pin
		}
		if holds {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		}
		return s
	}
	unattached := &iadv1alpha1.IPAddress{}
	attached := &iadv1alpha1.IPAddress{Status: iadv1alpha1.IPAddressStatus{
		AssociatedTo: &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "web"}}}
	lost := &iadv1alpha1.IPAddress{Status: iadv1alpha1.IPAddressStatus{Phase: iadv1alpha1.AddressLost}}
	hold := svc("ph", "hold", ip, false)
	web := svc("shop", "web", ip, false)
	deleting := svc("shop", "old", "", true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	bound := &iadv1alpha1.IPAddress{Spec: iadv1alpha1.IPAddressSpec{
		ClaimRef: &iadv1alpha1.ClaimReference{Namespace: "shop", Name: "web-ip", UID: "u1"}}}
	key := sharingkey.Keys{}.Of(bound)
	handing := svc("shop", "web", ip, true)
	handing.Annotations[marks.KeySharing] = key
	handing.Annotations[marks.KeyPinnedBy] = "web-ip"
	keyedOnly := svc("shop", "web", ip, true)
	keyedOnly.Annotations[marks.KeySharing] = key
	heldHold := svc("ph", "hold", ip, true)
	// A shared attachment: the address bound to shop/web-ip and attached
	// to shop/web, which carries the driver's pin and the claim's key.
	sharedAddr := bound.DeepCopy()
	sharedAddr.Status.AssociatedTo = &iadv1alpha1.WorkloadReference{Kind: "Service", Namespace: "shop", Name: "web"}
	sharing := func(holds bool) *corev1.Service {
		s := svc("shop", "web", ip, holds)
		s.Annotations[marks.KeyPinnedBy] = "web-ip"
		s.Annotations[marks.KeySharedBy] = "web-ip"
		s.Annotations[marks.KeySharing] = key
		return &s
	}
	tests := []struct {
		name     string
		a        *iadv1alpha1.IPAddress
		phs      []corev1.Service
		holders  []corev1.Service
		attached *corev1.Service
		want     string
	}{
		{"the hold gets nothing and nobody holds the address", unattached, []corev1.Service{hold}, nil, nil, "hold"},
		{"a Service being deleted does not count as a holder", unattached, []corev1.Service{hold}, []corev1.Service{deleting}, nil, "hold"},
		{"someone holds it: a conflict, not a stale allocation", unattached, []corev1.Service{hold}, []corev1.Service{svc("x", "rogue", ip, true)}, nil, ""},
		{"a Service handing the address back shares it: the hold is blocked", bound, []corev1.Service{hold}, []corev1.Service{handing}, nil, "hold"},
		{"a Service with the key but not the driver's pin for the claim holds it", bound, []corev1.Service{hold}, []corev1.Service{keyedOnly}, nil, ""},
		{"the hold shares it with the Service handing it back", bound, []corev1.Service{heldHold}, []corev1.Service{heldHold, handing}, nil, ""},
		{"a hold not pinned yet", unattached, []corev1.Service{svc("ph", "hold", "", false)}, nil, nil, ""},
		{"no placeholder yet", unattached, nil, nil, nil, ""},
		{"Lost: MetalLB has no such address", lost, []corev1.Service{hold}, nil, nil, ""},
		{"the attached Service gets nothing", attached, nil, nil, &web, "web"},
		{"attached, the placeholder is still there", attached, []corev1.Service{hold}, nil, &web, ""},
		{"attached, not pinned yet", attached, nil, nil, ptrTo(svc("shop", "web", "", false)), ""},
		{"attached, pinned elsewhere", attached, nil, nil, ptrTo(svc("shop", "web", "10.0.0.9", false)), ""},
		{"attached Service gone", attached, nil, nil, nil, ""},
		{"shared attachment: both hold it", sharedAddr, []corev1.Service{heldHold}, []corev1.Service{heldHold, *sharing(true)}, sharing(true), ""},
		{"shared attachment: only the placeholder holds it, the Service is blocked", sharedAddr, []corev1.Service{heldHold}, []corev1.Service{heldHold}, sharing(false), "web"},
		{"shared attachment: neither holds it, the Service is blocked", sharedAddr, []corev1.Service{hold}, nil, sharing(false), "web"},
		{"shared attachment: only the Service holds it, the placeholder is blocked", sharedAddr, []corev1.Service{hold}, []corev1.Service{*sharing(true)}, sharing(true), "hold"},
		{"shared attachment: the Service holds it and the placeholder is not pinned yet", sharedAddr, []corev1.Service{svc("ph", "hold", "", false)}, []corev1.Service{*sharing(true)}, sharing(true), ""},
		{"shared attachment: the Service and a rogue hold it", sharedAddr, []corev1.Service{hold}, []corev1.Service{*sharing(true), svc("x", "rogue", ip, true)}, sharing(true), ""},
		{"shared handoff under way: the hold holds it, the Service being attached is blocked", bound, []corev1.Service{heldHold}, []corev1.Service{heldHold}, sharing(false), "web"},
		{"shared handoff under way: both hold it", bound, []corev1.Service{heldHold}, []corev1.Service{heldHold, *sharing(true)}, sharing(true), ""},
		{"a Service being attached without the claim's key is not a rightful holder beside the hold", bound, []corev1.Service{heldHold}, []corev1.Service{heldHold}, &web, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Blocked(tt.a, ip, sharingkey.Keys{}.Of(tt.a), tt.phs, tt.holders, tt.attached)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			if assert.NotNil(t, got) {
				assert.Equal(t, tt.want, got.Name)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestPassTime(t *testing.T) {
	for _, tt := range []struct {
		allocated int64
		want      time.Duration
	}{
		{0, 0},
		{20, time.Second},
		{121, 6050 * time.Millisecond},
		{1121, 56050 * time.Millisecond},
	} {
		assert.Equal(t, tt.want, PassTime(tt.allocated), "%d allocated Services", tt.allocated)
	}
}

func TestSettled(t *testing.T) {
	svc := func(pin string, held ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if pin != "" {
			s.Annotations[marks.KeyPin] = pin
		}
		for _, ip := range held {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want bool
	}{
		{"holds its one pinned address", svc("10.0.0.2", "10.0.0.2"), true},
		{"holds nothing", svc("10.0.0.2"), false},
		{"holds the address, no pin", svc("", "10.0.0.2"), true},
		{"holds every pinned address", svc("10.0.0.2,2001:db8::2", "10.0.0.2", "2001:db8::2"), true},
		{"the other pinned address still refused", svc("10.0.0.2,2001:db8::2", "10.0.0.2"), false},
		{"holds another address only", svc("2001:db8::2", "2001:db8::2"), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, settled(tc.svc, "10.0.0.2")) })
	}
}
