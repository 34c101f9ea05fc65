package soak

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/parking"
)

// Invariants checked once the system has converged after the storm.
const (
	FinalHeld        = "unattached-address-held-once"
	FinalAttached    = "attached-service-holds-its-ip"
	FinalSharedHold  = "shared-attachment-keeps-its-hold"
	FinalOrphans     = "no-orphan-placeholder"
	FinalMarkers     = "no-stray-pin-or-marker"
	FinalLeak        = "no-leak"
	FinalDoubleHold  = "no-double-hold-at-rest"
	FinalPhases      = "no-conflict-or-lost-at-rest"
	FinalRetain      = "retain-address-survives"
	FinalAttachLives = "annotated-service-attached"
	FinalQuiet       = "resource-versions-quiet"
)

// State is what the final invariants look at, listed live from the API.
type State struct {
	Services  []corev1.Service
	Addresses []iadv1alpha1.IPAddress
	Claims    []iadv1alpha1.IPAddressClaim
}

// ListState lists the state from the API server.
func ListState(ctx context.Context, k client.Client) (*State, error) {
	st := &State{}
	sl := &corev1.ServiceList{}
	if err := k.List(ctx, sl); err != nil {
		return nil, err
	}
	al := &iadv1alpha1.IPAddressList{}
	if err := k.List(ctx, al); err != nil {
		return nil, err
	}
	cl := &iadv1alpha1.IPAddressClaimList{}
	if err := k.List(ctx, cl); err != nil {
		return nil, err
	}
	st.Services, st.Addresses, st.Claims = sl.Items, al.Items, cl.Items
	return st, nil
}

// Finding is one final invariant that does not hold.
type Finding struct{ Kind, Detail string }

// CheckFinal evaluates every final invariant on a state and returns how many
// checks it made per invariant and what does not hold. retain lists every
// Retain address seen during the run, by name and uid.
func CheckFinal(s *State, placeholderNS string, retain map[string]string) (map[string]int, []Finding) {
	checks := map[string]int{}
	var out []Finding
	fail := func(kind, format string, args ...any) {
		out = append(out, Finding{kind, fmt.Sprintf(format, args...)})
	}
	svc := map[client.ObjectKey]*corev1.Service{}
	holders := map[string][]*corev1.Service{}
	for i := range s.Services {
		sv := &s.Services[i]
		svc[client.ObjectKeyFromObject(sv)] = sv
		for _, ip := range IngressIPs(sv) {
			holders[ip] = append(holders[ip], sv)
		}
	}
	byIP := map[string]*iadv1alpha1.IPAddress{}
	byName := map[string]*iadv1alpha1.IPAddress{}
	attachedTo := map[client.ObjectKey]bool{}
	for i := range s.Addresses {
		a := &s.Addresses[i]
		byIP[canonical(a.Spec.Address)] = a
		byName[a.Name] = a
		if at := a.Status.AssociatedTo; at != nil {
			attachedTo[client.ObjectKey{Namespace: at.Namespace, Name: at.Name}] = true
		}
	}
	claims := map[client.ObjectKey]*iadv1alpha1.IPAddressClaim{}
	for i := range s.Claims {
		claims[client.ObjectKeyFromObject(&s.Claims[i])] = &s.Claims[i]
	}

	for i := range s.Addresses {
		a := &s.Addresses[i]
		ip := canonical(a.Spec.Address)
		checks[FinalPhases]++
		if a.Status.Phase == iadv1alpha1.AddressConflict || a.Status.Phase == iadv1alpha1.AddressLost {
			fail(FinalPhases, "address %s (%s) is %s", a.Name, ip, a.Status.Phase)
		}
		if a.DeletionTimestamp != nil {
			continue
		}
		if a.Status.AssociatedTo == nil {
			checks[FinalHeld]++
			n := 0
			var who []string
			for _, h := range holders[ip] {
				who = append(who, h.Namespace+"/"+h.Name)
				if h.Namespace == placeholderNS {
					n++
				}
			}
			if n != 1 || len(who) != 1 {
				fail(FinalHeld, "unattached address %s (%s) is held by %d placeholders (holders: %v)", a.Name, ip, n, who)
			}
			continue
		}
		checks[FinalAttached]++
		at := a.Status.AssociatedTo
		w := svc[client.ObjectKey{Namespace: at.Namespace, Name: at.Name}]
		switch {
		case w == nil:
			fail(FinalAttached, "address %s is attached to %s/%s, which does not exist", a.Name, at.Namespace, at.Name)
		case a.Spec.ClaimRef == nil || w.Annotations[marks.KeyPinnedBy] != a.Spec.ClaimRef.Name:
			fail(FinalAttached, "Service %s/%s holding %s lacks the driver's marker for its claim", w.Namespace, w.Name, a.Name)
		default:
			var same []string
			for _, got := range IngressIPs(w) {
				if is6(got) == is6(ip) {
					same = append(same, canonical(got))
				}
			}
			if len(same) != 1 || same[0] != ip {
				fail(FinalAttached, "Service %s/%s attached to %s (%s) holds %v", w.Namespace, w.Name, a.Name, ip, same)
			}
		}
		// A shared attachment keeps its hold: exactly one placeholder of
		// the address holds the IP beside the Service. Any other
		// attachment has none (the double-hold check below sees one).
		if w != nil && SharedAttachment(a, w) {
			checks[FinalSharedHold]++
			n := 0
			for _, h := range holders[ip] {
				if IsPlaceholderOf(h, a, placeholderNS) {
					n++
				}
			}
			if n != 1 {
				fail(FinalSharedHold, "address %s (%s) attached to %s/%s in a shared attachment is held by %d of its placeholders",
					a.Name, ip, w.Namespace, w.Name, n)
			}
		}
	}

	for i := range s.Services {
		sv := &s.Services[i]
		key := client.ObjectKeyFromObject(sv)
		if sv.Namespace == placeholderNS && sv.Labels[marks.LabelPlaceholder] != "" {
			checks[FinalOrphans]++
			if name := sv.Labels[marks.LabelAddress]; name != "" {
				a := byName[name]
				// An attached address keeps its hold beside the Service
				// (shared attachment) or parked in the parking pool.
				attached := a != nil && a.Status.AssociatedTo != nil
				if a == nil || a.DeletionTimestamp != nil || (attached && !sharedWith(a, svc) && !marks.Of(sv).Parked(parking.DefaultPool)) {
					fail(FinalOrphans, "placeholder %s holds for address %s, which is gone or attached (not in a shared attachment, not parked)", sv.Name, name)
				}
			} else {
				c := claims[client.ObjectKey{Namespace: sv.Annotations[marks.AnnotationClaimNamespace], Name: sv.Annotations[marks.AnnotationClaimName]}]
				if c == nil || c.DeletionTimestamp != nil || string(c.UID) != sv.Labels[marks.LabelClaimUID] {
					fail(FinalOrphans, "allocation placeholder %s serves no live claim", sv.Name)
				}
			}
			continue
		}
		checks[FinalMarkers]++
		if ReleasePinned(sv) {
			fail(FinalMarkers, "Service %s carries a release pin", key)
		}
		for _, m := range []string{marks.KeyPinnedBy, marks.KeySharedBy} {
			if _, ok := sv.Annotations[m]; ok && !attachedTo[key] {
				fail(FinalMarkers, "Service %s carries %s but nothing is attached to it", key, m)
			}
		}
	}

	var ips []string
	for ip := range holders {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	for _, ip := range ips {
		if !Universe(ip) {
			continue
		}
		checks[FinalLeak]++
		if byIP[canonical(ip)] == nil {
			var who []string
			for _, h := range holders[ip] {
				who = append(who, h.Namespace+"/"+h.Name)
			}
			fail(FinalLeak, "IP %s is assigned to %s but no address records it", ip, strings.Join(who, ","))
		}
		checks[FinalDoubleHold]++
		if len(holders[ip]) > 1 && !sharedAtRest(byIP[canonical(ip)], holders[ip], placeholderNS) {
			var who []string
			for _, h := range holders[ip] {
				who = append(who, h.Namespace+"/"+h.Name)
			}
			fail(FinalDoubleHold, "IP %s is held by %s", ip, strings.Join(who, ","))
		}
	}

	for name, uid := range retain {
		checks[FinalRetain]++
		if a := byName[name]; a == nil || string(a.UID) != uid {
			fail(FinalRetain, "Retain address %s did not survive", name)
		}
	}

	// A Bound claim that a fitting tenant Service asks for is attached to
	// one of them.
	for _, c := range s.Claims {
		if c.Status.Phase != iadv1alpha1.ClaimBound || c.DeletionTimestamp != nil {
			continue
		}
		var asking []*corev1.Service
		for i := range s.Services {
			sv := &s.Services[i]
			if sv.Namespace == c.Namespace && sv.DeletionTimestamp == nil &&
				sv.Annotations[iadv1alpha1.ServiceClaimAnnotation] == c.Name && fits(sv, c.Spec.Family) {
				asking = append(asking, sv)
			}
		}
		if len(asking) == 0 {
			continue
		}
		checks[FinalAttachLives]++
		ok := false
		for _, sv := range asking {
			ok = ok || attachedTo[client.ObjectKeyFromObject(sv)]
		}
		if !ok {
			var who []string
			for _, sv := range asking {
				who = append(who, fmt.Sprintf("%s (ingress %v, annotations %v)", sv.Name, IngressIPs(sv), driverAnnotations(sv)))
			}
			fail(FinalAttachLives, "Bound claim %s/%s (addresses %v) is asked for by %s and attached to none",
				c.Namespace, c.Name, c.Status.Addresses, strings.Join(who, "; "))
		}
	}
	return checks, out
}

// sharedWith reports whether the address is attached, in a shared
// attachment, to a Service that exists.
func sharedWith(a *iadv1alpha1.IPAddress, svc map[client.ObjectKey]*corev1.Service) bool {
	at := a.Status.AssociatedTo
	if at == nil {
		return false
	}
	w := svc[client.ObjectKey{Namespace: at.Namespace, Name: at.Name}]
	return w != nil && SharedAttachment(a, w)
}

// sharedAtRest reports whether the holders of an IP at rest are exactly
// one placeholder of its address and the Service the address is attached
// to in a shared attachment: the one double hold allowed at rest.
func sharedAtRest(a *iadv1alpha1.IPAddress, holders []*corev1.Service, placeholderNS string) bool {
	if a == nil || len(holders) != 2 {
		return false
	}
	var placeholders, workloads int
	for _, h := range holders {
		switch {
		case IsPlaceholderOf(h, a, placeholderNS):
			placeholders++
		case SharedAttachment(a, h):
			workloads++
		}
	}
	return placeholders == 1 && workloads == 1
}

// driverAnnotations returns a Service's annotations in the driver's and
// MetalLB's domains, which say how far an attachment got.
func driverAnnotations(s *corev1.Service) map[string]string {
	out := map[string]string{}
	for k, v := range s.Annotations {
		if strings.Contains(k, "metallb") || strings.Contains(k, "cozystack") {
			out[k] = v
		}
	}
	return out
}

// fits reports whether a Service's families are exactly the claim's.
func fits(s *corev1.Service, fam iadv1alpha1.IPFamily) bool {
	var want []corev1.IPFamily
	switch fam {
	case iadv1alpha1.FamilyIPv6:
		want = []corev1.IPFamily{corev1.IPv6Protocol}
	case iadv1alpha1.FamilyDual:
		want = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	default:
		want = []corev1.IPFamily{corev1.IPv4Protocol}
	}
	if len(s.Spec.IPFamilies) != len(want) {
		return false
	}
	for i := range want {
		if s.Spec.IPFamilies[i] != want[i] {
			return false
		}
	}
	return true
}

func canonical(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	return a.Unmap().String()
}

func is6(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.Unmap().Is6()
}

// versions records the resourceVersion of every object the driver, MetalLB
// or the core write (Services, addresses, claims, classes, pools and
// advertisements), to tell whether anything keeps being rewritten.
func versions(ctx context.Context, k client.Client) (map[string]string, error) {
	out := map[string]string{}
	lists := []client.ObjectList{&corev1.ServiceList{}, &iadv1alpha1.IPAddressList{}, &iadv1alpha1.IPAddressClaimList{},
		&iadv1alpha1.IPAddressClassList{}, &metallbv1beta1.IPAddressPoolList{}, &metallbv1beta1.L2AdvertisementList{}}
	for _, l := range lists {
		if err := k.List(ctx, l); err != nil {
			return nil, err
		}
		items, err := metaItems(l)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			// The generation tells a spec change from a status or
			// metadata change in the report.
			out[fmt.Sprintf("%T %s/%s", l, o.GetNamespace(), o.GetName())] = fmt.Sprintf("%s/%d", o.GetResourceVersion(), o.GetGeneration())
		}
	}
	return out, nil
}

// quiet compares the resourceVersions over d and returns what changed.
func quiet(ctx context.Context, k client.Client, d time.Duration) ([]string, error) {
	before, err := versions(ctx, k)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	after, err := versions(ctx, k)
	if err != nil {
		return nil, err
	}
	var changed []string
	for key, v := range after {
		if b := before[key]; b != v {
			_, g0, _ := strings.Cut(b, "/")
			_, g1, _ := strings.Cut(v, "/")
			what := "spec"
			if g0 == g1 {
				what = "status or metadata"
			}
			changed = append(changed, fmt.Sprintf("%s (%s)", key, what))
		}
	}
	for key := range before {
		if _, ok := after[key]; !ok {
			changed = append(changed, key+" (deleted)")
		}
	}
	sort.Strings(changed)
	return changed, nil
}

// FinalWarm is the invariant of warm reservations at rest.
const FinalWarm = "warm-reservations-kept"

// WarmClass is what a class with warm reservations asks for at the end of
// a run: Warm Available addresses of each family, out of Size addresses
// per family.
type WarmClass struct{ Size, Warm int }

// CheckWarm evaluates, for each class of classes and each family, that the
// class keeps as many warm addresses (Available, bound to no claim, taken
// from the class's ranges) as it asks for, or as many as the addresses
// the rest of its ledger leaves free: a warm address counts against the
// class like any other, and none is kept beyond the number asked for.
func CheckWarm(s *State, classes map[string]WarmClass) (int, []Finding) {
	type key struct {
		class string
		v6    bool
	}
	warm, other := map[key]int{}, map[key]int{}
	for i := range s.Addresses {
		a := &s.Addresses[i]
		if _, ok := classes[a.Spec.ClassName]; !ok || a.DeletionTimestamp != nil {
			continue
		}
		k := key{a.Spec.ClassName, is6(a.Spec.Address)}
		if a.Status.Phase == iadv1alpha1.AddressAvailable && a.Spec.ClaimRef == nil && a.Spec.Source.FromClass != nil {
			warm[k]++
		} else {
			other[k]++
		}
	}
	checks := 0
	var out []Finding
	for name, c := range classes {
		for _, v6 := range []bool{false, true} {
			checks++
			k := key{name, v6}
			want := min(c.Warm, max(c.Size-other[k], 0))
			if warm[k] != want {
				fam := "IPv4"
				if v6 {
					fam = "IPv6"
				}
				out = append(out, Finding{FinalWarm, fmt.Sprintf("class %s keeps %d warm %s addresses, want %d (warmAddresses %d, %d of %d taken otherwise)",
					name, warm[k], fam, want, c.Warm, other[k], c.Size)})
			}
		}
	}
	return checks, out
}

// Describe renders, for a run that did not converge, every address and
// every Service that holds or waits for an IP of the soak's classes: what
// to read first when an invariant does not hold.
func Describe(s *State) []string {
	var out []string
	for i := range s.Addresses {
		a := &s.Addresses[i]
		line := fmt.Sprintf("address %s %s class %s phase %s", a.Name, a.Spec.Address, a.Spec.ClassName, a.Status.Phase)
		if ref := a.Spec.ClaimRef; ref != nil {
			line += fmt.Sprintf(" claim %s/%s", ref.Namespace, ref.Name)
		}
		if at := a.Status.AssociatedTo; at != nil {
			line += fmt.Sprintf(" attached to %s/%s", at.Namespace, at.Name)
		}
		if a.DeletionTimestamp != nil {
			line += " (being deleted)"
		}
		out = append(out, line)
	}
	for i := range s.Services {
		sv := &s.Services[i]
		if sv.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		ips := IngressIPs(sv)
		soak := false
		for _, ip := range ips {
			soak = soak || Universe(ip)
		}
		if !soak && len(ips) > 0 {
			continue
		}
		out = append(out, fmt.Sprintf("service %s/%s ingress %v labels %v annotations %v", sv.Namespace, sv.Name, ips, sv.Labels, driverAnnotations(sv)))
	}
	return out
}
