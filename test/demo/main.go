// Command demo tells the driver's whole story on a local control plane:
// etcd, kube-apiserver, kube-controller-manager, the real MetalLB controller,
// the reference core and the four driver binaries (each as its own
// ServiceAccount, with its own lease). A Service that MetalLB served before
// the driver was installed is adopted with its address; then a tenant claims
// an address, attaches it to a Service, detaches it, attaches it to another
// Service and gets the same IP back, then gives it up.
//
//	make demo                           # the story, then keep the cluster until Ctrl-C
//	make demo DEMO_ARGS=--no-wait       # the story, then stop
//
// Stopped by the user (Ctrl-C, SIGTERM), it stops and removes everything it
// started and exits 0; a failure exits 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/conditions"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

const tenant = "tenant-a"

// The cluster as it was before the driver: MetalLB's own pool legacy and a
// plain LoadBalancer Service, shop/storefront, holding an address from it.
const (
	legacyNamespace = "shop"
	legacyService   = "storefront"
	legacyPool      = "legacy"
	legacyRange     = "198.51.100.20-198.51.100.23"
)

// classAddresses are the demo class's ranges. The IPv4 range starts at a
// host address: from a CIDR such as 198.51.100.0/29, MetalLB hands out the
// network address .0 first unless avoidBuggyIPs is set.
var classAddresses = []string{"198.51.100.10-198.51.100.17", "2001:db8:100::10-2001:db8:100::1f"}

// stoppedMessage is what a user sees after stopping the demo.
const stoppedMessage = "Stopped: the four controllers, the reference core, MetalLB, kube-controller-manager, " +
	"kube-apiserver and etcd are stopped and their temporary files removed."

func main() {
	noWait := flag.Bool("no-wait", false, "stop after the story instead of keeping the control plane running until interrupted")
	flag.Parse()
	log.SetLogger(logr.Discard()) // quiet: the story prints what matters

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	giveBack := foreground()
	err := run(ctx, !*noWait)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		fmt.Println("\n" + stoppedMessage)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo failed:", err)
	}
	giveBack()
	os.Exit(exitCode(err, interrupted))
}

// exitCode is the demo's exit status: 0 when the story ran through or the
// user stopped it (everything is cleaned up by then, whatever step the
// interrupt cut short), 1 when something failed.
func exitCode(err error, interrupted bool) int {
	if err != nil && !interrupted {
		return 1
	}
	return 0
}

func step(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }
func say(format string, args ...any)  { fmt.Printf("    "+format+"\n", args...) }

// run tells the story; with keep, it then leaves a few objects to explore and
// waits until ctx ends (the user's Ctrl-C). Everything it started is stopped
// and removed when it returns.
func run(ctx context.Context, keep bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	step("Starting the local control plane (etcd, kube-apiserver, kube-controller-manager, MetalLB controller),")
	say("the reference core and the four driver binaries, each as its own ServiceAccount")
	t0 := time.Now()
	// The demo handles SIGINT and SIGTERM itself, to stop cleanly with status 0.
	s, err := cluster.StartStack(ctx, cluster.StackOptions{Cluster: cluster.Options{NoSignalHandler: true}})
	if err != nil {
		return err
	}
	defer s.Stop()
	c := s.Cluster
	say("up in %s; admin kubeconfig: %s", time.Since(t0).Round(time.Millisecond), c.Kubeconfig)
	for _, name := range cluster.Controllers {
		say("%-9s ready, lease %s, logs %s", name, names.LeaseID(name), s.Replicas(name)[0].LogPath)
	}

	k := c.Client
	legacyIP, err := before(ctx, k, c)
	if err != nil {
		return err
	}

	step("An admin creates the class 'public' served by %s, covering the legacy range too, with adoptExisting: true", names.Provisioner)
	ranges := append(append([]string{}, classAddresses...), legacyRange)
	params, err := json.Marshal(map[string]any{"addresses": ranges, "adoptExisting": true})
	if err != nil {
		return err
	}
	say("ranges %s", strings.Join(ranges, ", "))
	class := cluster.Class("public", iadv1alpha1.ReclaimRetain, string(params))
	class.Annotations = map[string]string{iadv1alpha1.DefaultClassAnnotation: "true"}
	if err := k.Create(ctx, class); err != nil {
		return err
	}
	if err := waitFor(ctx, "the class controller renders pool iad-public", func() (bool, error) {
		err := k.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName("public")}, &metallbv1beta1.IPAddressPool{})
		return err == nil, err
	}); err != nil {
		return err
	}
	say("MetalLB pool %s/%s rendered (autoAssign: false, admits only Services carrying %s=public);", cluster.MetalLBNamespace, names.PoolName("public"), marks.LabelGrant)
	say("MetalLB declines it while it overlaps pool %s and keeps serving its last valid configuration", legacyPool)
	if err := adopt(ctx, k, legacyIP); err != nil {
		return err
	}
	tables(ctx, k)

	step("Tenant %s claims an address: IPAddressClaim web-ip", tenant)
	if err := c.EnsureNamespace(ctx, tenant); err != nil {
		return err
	}
	claim := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web-ip"}}
	if err := k.Create(ctx, claim); err != nil {
		return err
	}
	ip, err := boundIP(ctx, k, "the claim is Bound", claim)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "a placeholder holds the address", func() (bool, error) {
		a := &iadv1alpha1.IPAddress{}
		if err := k.Get(ctx, client.ObjectKey{Name: claim.Status.Addresses[0].Name}, a); err != nil {
			return false, err
		}
		return conditions.IsTrue(a.Status.Conditions, conditions.Held), nil
	}); err != nil {
		return err
	}
	say("claim %s/%s is Bound to %s (IPAddress %s), held by a silent placeholder Service", tenant, claim.Name, ip, claim.Status.Addresses[0].Name)
	tables(ctx, k)

	step("The tenant attaches it: Service web annotated %s: web-ip", iadv1alpha1.ServiceClaimAnnotation)
	if err := attach(ctx, k, "web", ip); err != nil {
		return err
	}
	tables(ctx, k)

	step("The tenant deletes Service web: the address stays Bound, still held by its placeholder")
	if err := k.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web"}}); err != nil {
		return err
	}
	addrName := claim.Status.Addresses[0].Name
	holder := ""
	if err := waitFor(ctx, "the address is detached and held", func() (bool, error) {
		a := &iadv1alpha1.IPAddress{}
		if err := k.Get(ctx, client.ObjectKey{Name: addrName}, a); err != nil {
			return false, err
		}
		// The placeholder that stepped aside to the parking pool while the
		// Service held the address holds it again.
		var phs corev1.ServiceList
		if err := k.List(ctx, &phs, client.InNamespace(cluster.DriverNamespace), client.MatchingLabels{marks.LabelAddress: addrName}); err != nil {
			return false, err
		}
		holder = ""
		for i := range phs.Items {
			if phs.Items[i].DeletionTimestamp == nil && hasIngress(&phs.Items[i], ip) {
				holder = phs.Items[i].Name
			}
		}
		return a.Status.AssociatedTo == nil && a.Status.Phase == iadv1alpha1.AddressBound && holder != "", nil
	}); err != nil {
		return err
	}
	say("IPAddress %s: phase Bound, attached to nothing, %s held by placeholder %s", addrName, ip, holder)
	tables(ctx, k)

	step("The tenant attaches the claim to another Service, web-v2: the same IP comes back")
	if err := attach(ctx, k, "web-v2", ip); err != nil {
		return err
	}
	tables(ctx, k)

	step("The tenant deletes the claim: under Retain the address is Released, still reserved")
	if err := k.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web-v2"}}); err != nil {
		return err
	}
	if err := k.Delete(ctx, claim); err != nil {
		return err
	}
	if err := waitFor(ctx, "the address is Released", func() (bool, error) {
		a := &iadv1alpha1.IPAddress{}
		if err := k.Get(ctx, client.ObjectKey{Name: addrName}, a); err != nil {
			return false, err
		}
		return a.Status.Phase == iadv1alpha1.AddressReleased, nil
	}); err != nil {
		return err
	}
	say("IPAddress %s (%s) is Released: an admin can recycle it by clearing claimRef, or delete it to free the IP", addrName, ip)
	tables(ctx, k)

	step("Done: the whole story ran on a real API server with the real MetalLB controller")
	if !keep {
		return nil
	}

	step("Left running for you to explore: web-ip attached to Service web again, and db-ip Pending")
	pending, err := explore(ctx, k)
	if err != nil {
		return err
	}
	tables(ctx, k)
	fmt.Printf("\n    The control plane keeps running. In another terminal:\n\n    export KUBECONFIG=%s\n", c.Kubeconfig)
	hints := [][2]string{
		{"kubectl get ipaddressclaims -A -l " + marks.LabelImported + "=true", "the claims the driver generated to adopt what MetalLB had assigned"},
		{fmt.Sprintf("kubectl describe service -n %s %s", legacyNamespace, legacyService), "the adopted Service: its claim annotation, the driver's pin, the Imported Event"},
		{fmt.Sprintf("kubectl get events -n %s --field-selector reason=Imported", legacyNamespace), "the import, on the Service and on the generated claim"},
		{fmt.Sprintf("kubectl describe ipaddressclaim -n %s %s", tenant, pending), "why a claim is Pending: its conditions and Events"},
		{"kubectl get ipaddresses.local.sdn.cozystack.io", "every address, its claim and the Service it is attached to"},
		{fmt.Sprintf("curl -s http://%s/metrics | grep '^metallb_iad_'", s.Replicas("ipaddress")[0].MetricsAddr), "the ipaddress controller's metrics"},
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	for _, h := range hints {
		fmt.Fprintf(w, "    %s\t# %s\n", h[0], h[1])
	}
	_ = w.Flush()
	fmt.Print("\n    (plain \"ipaddresses\" is networking.k8s.io's kind: use the full name)\n    Ctrl-C stops everything and cleans up.\n")
	<-ctx.Done()
	step("Stopping everything")
	return nil
}

// explore leaves something to look at while the demo waits: the claim web-ip
// again, attached to Service web, and a claim that stays Pending because it
// names a class that does not exist. It returns the Pending claim's name.
func explore(ctx context.Context, k client.Client) (string, error) {
	claim := &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "web-ip"}}
	if err := waitFor(ctx, "the deleted claim web-ip is gone", func() (bool, error) {
		err := k.Get(ctx, client.ObjectKeyFromObject(claim), &iadv1alpha1.IPAddressClaim{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}); err != nil {
		return "", err
	}
	if err := k.Create(ctx, claim); err != nil {
		return "", err
	}
	ip, err := boundIP(ctx, k, "the claim web-ip is Bound again", claim)
	if err != nil {
		return "", err
	}
	if err := attach(ctx, k, "web", ip); err != nil {
		return "", err
	}
	pending := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "db-ip"},
		Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: "private"},
	}
	if err := k.Create(ctx, pending); err != nil {
		return "", err
	}
	if err := waitFor(ctx, "the claim db-ip reports its missing class", func() (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(pending), pending); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(pending.Status.Conditions, iadv1alpha1.ClaimConditionClassResolved)
		return c != nil && c.Reason == iadv1alpha1.ReasonClassNotFound, nil
	}); err != nil {
		return "", err
	}
	say("claim %s/%s stays Pending: it names the class 'private', which does not exist", tenant, pending.Name)
	return pending.Name, nil
}

func attach(ctx context.Context, k client.Client, name, ip string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: name,
			Annotations: map[string]string{iadv1alpha1.ServiceClaimAnnotation: "web-ip"}},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	start := time.Now()
	if err := k.Create(ctx, svc); err != nil {
		return err
	}
	if err := waitFor(ctx, "Service "+name+" gets "+ip, func() (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, err
		}
		return hasIngress(svc, ip), nil
	}); err != nil {
		return err
	}
	say("Service %s/%s has ingress %s after %s (pin %s=%s)", tenant, name, ip, time.Since(start).Round(time.Millisecond),
		marks.KeyPin, svc.Annotations[marks.KeyPin])
	return nil
}

func hasIngress(s *corev1.Service, ip string) bool {
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP == ip {
			return true
		}
	}
	return false
}

func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("waiting until %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w", what, errors.New("timed out after 60s"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tables prints what a person would look at with kubectl: claims, addresses
// (phase, attached-to) and Services with their IPs.
func tables(ctx context.Context, k client.Client) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	claims := &iadv1alpha1.IPAddressClaimList{}
	if err := k.List(ctx, claims); err == nil {
		fmt.Fprintln(w, "\n    CLAIM\tPHASE\tCLASS\tADDRESSES")
		for _, c := range claims.Items {
			var ips []string
			for _, a := range c.Status.Addresses {
				ips = append(ips, a.Address)
			}
			fmt.Fprintf(w, "    %s/%s\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Status.Phase, c.Status.ClassName, strings.Join(ips, ","))
		}
	}
	addrs := &iadv1alpha1.IPAddressList{}
	if err := k.List(ctx, addrs); err == nil {
		fmt.Fprintln(w, "\n    IPADDRESS\tADDRESS\tPHASE\tCLAIM\tATTACHED-TO\tHELD")
		for _, a := range addrs.Items {
			claim, attached, held := "-", "-", "-"
			if r := a.Spec.ClaimRef; r != nil {
				claim = r.Namespace + "/" + r.Name
			}
			if at := a.Status.AssociatedTo; at != nil {
				attached = at.Namespace + "/" + at.Name
			}
			if c := meta.FindStatusCondition(a.Status.Conditions, conditions.Held); c != nil {
				held = string(c.Status) + " (" + c.Reason + ")"
			}
			fmt.Fprintf(w, "    %s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.Spec.Address, a.Status.Phase, claim, attached, held)
		}
	}
	svcs := &corev1.ServiceList{}
	if err := k.List(ctx, svcs); err == nil {
		fmt.Fprintln(w, "\n    SERVICE\tTYPE\tEXTERNAL-IP\tROLE")
		for _, s := range svcs.Items {
			if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
				continue
			}
			role := "workload"
			if r := s.Labels[marks.LabelPlaceholder]; r != "" {
				role = r + " placeholder"
			}
			ips := strings.Join(ingressIPs(&s), ",")
			if ips == "" {
				ips = "<pending>"
			}
			fmt.Fprintf(w, "    %s/%s\t%s\t%s\t%s\n", s.Namespace, s.Name, s.Spec.Type, ips, role)
		}
	}
}

func ingressIPs(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// boundIP waits (saying what) until claim is Bound to one address, keeps the
// claim read last in claim and returns the address.
func boundIP(ctx context.Context, k client.Client, what string, claim *iadv1alpha1.IPAddressClaim) (string, error) {
	var ip string
	err := waitFor(ctx, what, func() (bool, error) {
		if err := k.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return false, err
		}
		if claim.Status.Phase == iadv1alpha1.ClaimBound && len(claim.Status.Addresses) == 1 {
			ip = claim.Status.Addresses[0].Address
			return true, nil
		}
		return false, nil
	})
	return ip, err
}
