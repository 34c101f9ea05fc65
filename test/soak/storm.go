package soak

import (
	"context"
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// Limits on what the storm keeps alive at once; the pools hold 8 addresses
// per family and class, so claims run out of addresses and wait.
const (
	maxClaims   = 36
	maxServices = 30
	maxRogues   = 2
)

// Service shapes: the first may take the shared handoff; the others force
// the gap handoff.
const (
	shapeShared   = "shared"
	shapeLocal    = "local"    // externalTrafficPolicy: Local
	shapePort9    = "port-9"   // the placeholder's port
	shapeOwnKey   = "own-key"  // its own sharing key
	shapeMismatch = "mismatch" // a family the claim cannot serve
)

var shapes = []string{shapeShared, shapeShared, shapeLocal, shapePort9, shapeOwnKey}

// fault is one kill (or API server restart) the fault worker carries out.
type fault struct {
	target     string // a controller, "metallb" or "apiserver"
	pickLeader bool
}

type claimRec struct {
	ns, name string
	family   iadv1alpha1.IPFamily
}

type storm struct {
	cfg   Config
	rng   *rand.Rand
	k     client.Client
	s     *cluster.Stack
	out   func(format string, args ...any)
	seq   int
	edit  map[string]int // editable class -> addresses per family now
	warm  map[string]int // class -> warm reservations per family now
	claim []claimRec     // live claims the storm created, oldest first
	svcs  []types.NamespacedName
	rogue []types.NamespacedName

	ops      map[string]int
	opErrors map[string]int

	faults chan fault
	fwg    sync.WaitGroup
	fmu    sync.Mutex
	kills  map[string]int
	fErrs  []string

	// opClass is the class the running operation is about ("": none).
	opClass string
	// history is every operation and fault, with when it ran (under fmu).
	history []stormEvent
}

// note records an operation or a fault in the history.
func (st *storm) note(e stormEvent) {
	st.fmu.Lock()
	st.history = append(st.history, e)
	st.fmu.Unlock()
}

// History returns the operations and faults so far.
func (st *storm) History() []stormEvent {
	st.fmu.Lock()
	defer st.fmu.Unlock()
	return append([]stormEvent(nil), st.history...)
}

func newStorm(cfg Config, k client.Client, s *cluster.Stack, out func(string, ...any)) *storm {
	st := &storm{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), k: k, s: s, out: out,
		edit: map[string]int{}, warm: map[string]int{}, ops: map[string]int{}, opErrors: map[string]int{},
		faults: make(chan fault, 64), kills: map[string]int{}}
	for _, c := range Classes {
		st.edit[c.Name], st.warm[c.Name] = c.Wide, c.Warm
	}
	return st
}

// schedule spreads n events evenly over ops operations: the operation
// indexes after which each happens.
func schedule(ops, n int) []int {
	out := make([]int, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, (i+1)*ops/(n+1))
	}
	return out
}

// killTargets returns the processes of each kill, in order: the four
// controllers and MetalLB in a seeded shuffle, repeated, so kills spread
// over all of them.
func killTargets(rng *rand.Rand, n int) []string {
	all := append(append([]string{}, cluster.Controllers...), "metallb")
	var out []string
	for len(out) < n {
		round := slices.Clone(all)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		out = append(out, round...)
	}
	return out[:n]
}

type weighted struct {
	name   string
	weight int
	run    func(ctx context.Context) error
}

func (st *storm) mix() []weighted {
	return []weighted{
		{"claim-create", 22, st.createClaim},
		{"claim-delete", 8, st.deleteClaim},
		{"service-create", 16, st.createService},
		{"service-reannotate", 6, st.reannotate},
		{"service-unannotate", 4, st.unannotate},
		{"service-delete", 7, st.deleteService},
		{"address-recycle", 5, st.recycle},
		{"claim-by-address-name", 3, st.claimByName},
		{"class-grow", 1, st.classGrow},
		{"class-shrink", 1, st.classShrink},
		{"class-warm", 2, st.classWarm},
		{"placeholder-delete", 2, st.placeholderDelete},
		{"placeholder-edit", 2, st.placeholderEdit},
		{"pool-edit", 1, st.poolEdit},
		{"pool-delete", 1, st.poolDelete},
		{"rogue-create", 1, st.rogueCreate},
		{"rogue-delete", 1, st.rogueDelete},
	}
}

// run issues the operations and schedules the faults; it returns when the
// operations are done or the time is up, and the faults have finished.
func (st *storm) run(ctx context.Context) {
	st.fwg.Add(1)
	go st.faultWorker(ctx)
	mix := st.mix()
	total := 0
	for _, m := range mix {
		total += m.weight
	}
	killAt := map[int]fault{}
	targets := killTargets(st.rng, st.cfg.Kills)
	for i, at := range schedule(st.cfg.Ops, st.cfg.Kills) {
		killAt[at] = fault{target: targets[i], pickLeader: st.rng.Intn(3) > 0}
	}
	// Class deletions and re-creations are scheduled like the faults, so
	// every run has some (one per 125 operations, at least two).
	recreateAt := map[int]bool{}
	for _, at := range schedule(st.cfg.Ops, max(2, st.cfg.Ops/125)) {
		recreateAt[at] = true
	}
	apiAt := map[int]bool{}
	for _, at := range schedule(st.cfg.Ops, st.cfg.APIRestarts) {
		apiAt[at+1] = true
	}
	pace := time.Duration(0)
	if st.cfg.Ops > 0 {
		pace = st.cfg.Duration * 7 / 10 / time.Duration(st.cfg.Ops)
	}
	deadline := time.Now().Add(st.cfg.Duration)
	apiPending := false
	for i := 0; i < st.cfg.Ops && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		if f, ok := killAt[i]; ok {
			st.faults <- f
		}
		if apiAt[i] {
			apiPending = true
		}
		r := st.rng.Intn(total)
		var op weighted
		for _, m := range mix {
			if r < m.weight {
				op = m
				break
			}
			r -= m.weight
		}
		if recreateAt[i] {
			op = weighted{name: "class-recreate", run: st.classRecreate}
		}
		st.ops[op.name]++
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st.opClass = ""
		start := time.Now()
		if err := op.run(octx); err != nil {
			st.opErrors[op.name]++
		}
		cancel()
		st.note(stormEvent{Kind: op.name, Class: st.opClass, Start: start, End: time.Now()})
		// Restart the API server right after an attach, so it lands in
		// the middle of a handoff.
		if apiPending && (op.name == "service-create" || op.name == "service-reannotate") {
			apiPending = false
			st.faults <- fault{target: "apiserver"}
		}
		time.Sleep(time.Duration(st.rng.Int63n(int64(2*pace) + 1)))
	}
	if apiPending {
		st.faults <- fault{target: "apiserver"}
	}
	close(st.faults)
	st.fwg.Wait()
}

// Ops is how many operations ran.
func (st *storm) Ops() int {
	n := 0
	for _, v := range st.ops {
		n += v
	}
	return n
}

func (st *storm) faultWorker(ctx context.Context) {
	defer st.fwg.Done()
	for f := range st.faults {
		start := time.Now()
		err := st.inject(ctx, f)
		st.note(stormEvent{Kind: f.target, Fault: true, Start: start, End: time.Now()})
		st.fmu.Lock()
		st.kills[f.target]++
		if err != nil {
			st.fErrs = append(st.fErrs, fmt.Sprintf("%s: %v", f.target, err))
		}
		st.fmu.Unlock()
	}
}

func (st *storm) inject(ctx context.Context, f fault) error {
	switch f.target {
	case "apiserver":
		return st.s.RestartAPIServer(ctx)
	case "metallb":
		st.s.KillMetalLB()
		return st.startMetalLB(ctx)
	}
	reps := st.s.Replicas(f.target)
	var victim *cluster.Driver
	if f.pickLeader {
		victim, _ = st.s.Leader(f.target)
	}
	if victim == nil && len(reps) > 0 {
		victim = reps[len(reps)-1]
	}
	if victim != nil {
		victim.Kill()
	}
	_, err := st.s.StartReplica(ctx, f.target)
	return err
}

// restore brings every process back after the storm: two replicas of each
// controller and a running MetalLB controller.
func (st *storm) restore(ctx context.Context, replicas int) error {
	if st.s.MetalLB() == nil || st.s.MetalLB().Exited() {
		if err := st.startMetalLB(ctx); err != nil {
			return err
		}
	}
	for _, c := range cluster.Controllers {
		for len(st.s.Replicas(c)) < replicas {
			if _, err := st.s.StartReplica(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// startMetalLB starts the MetalLB controller, trying again if it exits at
// start (it does when the API server is not answering yet).
func (st *storm) startMetalLB(ctx context.Context) error {
	var err error
	for range 5 {
		if err = st.s.StartMetalLB(ctx); err == nil {
			return nil
		}
	}
	return err
}

func (st *storm) name(prefix string) string {
	st.seq++
	return fmt.Sprintf("%s-%d", prefix, st.seq)
}

func (st *storm) pick(n int) int { return st.rng.Intn(n) }

var families = []iadv1alpha1.IPFamily{iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv4, iadv1alpha1.FamilyIPv6, iadv1alpha1.FamilyDual}

func (st *storm) createClaim(ctx context.Context) error {
	if len(st.claim) >= maxClaims {
		return st.deleteClaim(ctx)
	}
	c := claimRec{ns: Tenants[st.pick(len(Tenants))], name: st.name("claim"), family: families[st.pick(len(families))]}
	class := Classes[st.pick(len(Classes))].Name
	obj := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name},
		Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: class, Family: c.family},
	}
	if err := st.k.Create(ctx, obj); err != nil {
		return err
	}
	st.claim = append(st.claim, c)
	return nil
}

// takeOne removes an element the seed picks from *list and returns it;
// false when the list is empty.
func takeOne[T any](st *storm, list *[]T) (T, bool) {
	var zero T
	if len(*list) == 0 {
		return zero, false
	}
	i := st.pick(len(*list))
	v := (*list)[i]
	*list = slices.Delete(*list, i, i+1)
	return v, true
}

func (st *storm) deleteClaim(ctx context.Context) error {
	c, ok := takeOne(st, &st.claim)
	if !ok {
		return nil
	}
	return st.k.Delete(ctx, &iadv1alpha1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name}})
}

// serviceFor builds a tenant Service of a shape asking for claim c.
func serviceFor(ns, name string, c claimRec, shape string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{iadv1alpha1.ServiceClaimAnnotation: c.name}},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "web", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	single := corev1.IPFamilyPolicySingleStack
	dual := corev1.IPFamilyPolicyRequireDualStack
	switch c.family {
	case iadv1alpha1.FamilyIPv6:
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv6Protocol}, &single
	case iadv1alpha1.FamilyDual:
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, &dual
	default:
		s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
	}
	switch shape {
	case shapeLocal:
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.Selector = map[string]string{"app": name}
	case shapePort9:
		s.Spec.Ports[0].Port = 9
	case shapeOwnKey:
		s.Annotations[marks.KeySharing] = "own-" + name
	case shapeMismatch:
		if c.family == iadv1alpha1.FamilyDual {
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv4Protocol}, &single
		} else if c.family == iadv1alpha1.FamilyIPv6 {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		} else {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
		}
	}
	return s
}

func (st *storm) claimsIn(ns string) []claimRec {
	var out []claimRec
	for _, c := range st.claim {
		if c.ns == ns {
			out = append(out, c)
		}
	}
	return out
}

func (st *storm) createService(ctx context.Context) error {
	if len(st.svcs) >= maxServices {
		return st.deleteService(ctx)
	}
	ns := Tenants[st.pick(len(Tenants))]
	cs := st.claimsIn(ns)
	if len(cs) == 0 {
		return nil
	}
	c := cs[st.pick(len(cs))]
	shape := shapes[st.pick(len(shapes))]
	if st.pick(20) == 0 {
		shape = shapeMismatch
	}
	if st.pick(15) == 0 {
		c.name = st.name("missing-claim") // a claim that does not exist
	}
	s := serviceFor(ns, st.name("svc"), c, shape)
	if err := st.k.Create(ctx, s); err != nil {
		return err
	}
	st.svcs = append(st.svcs, client.ObjectKeyFromObject(s))
	return nil
}

func (st *storm) someService() (types.NamespacedName, bool) {
	if len(st.svcs) == 0 {
		return types.NamespacedName{}, false
	}
	return st.svcs[st.pick(len(st.svcs))], true
}

func (st *storm) reannotate(ctx context.Context) error {
	key, ok := st.someService()
	if !ok {
		return nil
	}
	cs := st.claimsIn(key.Namespace)
	if len(cs) == 0 {
		return nil
	}
	c := cs[st.pick(len(cs))]
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, iadv1alpha1.ServiceClaimAnnotation, c.name)
	return st.k.Patch(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		client.RawPatch(types.MergePatchType, []byte(patch)))
}

func (st *storm) unannotate(ctx context.Context) error {
	key, ok := st.someService()
	if !ok {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, iadv1alpha1.ServiceClaimAnnotation)
	return st.k.Patch(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		client.RawPatch(types.MergePatchType, []byte(patch)))
}

func (st *storm) deleteService(ctx context.Context) error {
	key, ok := takeOne(st, &st.svcs)
	if !ok {
		return nil
	}
	return st.k.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
}

// addresses lists the soak's addresses in the given phases, sorted by name
// so a seed picks the same one from the same state.
func (st *storm) addresses(ctx context.Context, phases ...iadv1alpha1.IPAddressPhase) ([]iadv1alpha1.IPAddress, error) {
	list := &iadv1alpha1.IPAddressList{}
	if err := st.k.List(ctx, list); err != nil {
		return nil, err
	}
	var out []iadv1alpha1.IPAddress
	for _, a := range list.Items {
		if len(phases) == 0 || slices.Contains(phases, a.Status.Phase) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// recycle is the admin recycling a Released address (clearing claimRef),
// and often a tenant claiming it right away by spec.addressName.
func (st *storm) recycle(ctx context.Context) error {
	list, err := st.addresses(ctx, iadv1alpha1.AddressReleased)
	if err != nil || len(list) == 0 {
		return err
	}
	a := list[st.pick(len(list))]
	base := a.DeepCopy()
	a.Spec.ClaimRef = nil
	if err := st.k.Patch(ctx, &a, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	if st.pick(2) == 0 {
		return st.claimAddress(ctx, &a)
	}
	return nil
}

func (st *storm) claimByName(ctx context.Context) error {
	list, err := st.addresses(ctx, iadv1alpha1.AddressAvailable)
	if err != nil || len(list) == 0 {
		return err
	}
	return st.claimAddress(ctx, &list[st.pick(len(list))])
}

func (st *storm) claimAddress(ctx context.Context, a *iadv1alpha1.IPAddress) error {
	if len(st.claim) >= maxClaims {
		return nil
	}
	fam := iadv1alpha1.FamilyIPv4
	if ip, err := netip.ParseAddr(a.Spec.Address); err == nil && ip.Is6() && !ip.Is4In6() {
		fam = iadv1alpha1.FamilyIPv6
	}
	c := claimRec{ns: Tenants[st.pick(len(Tenants))], name: st.name("claim"), family: fam}
	obj := &iadv1alpha1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name},
		Spec:       iadv1alpha1.IPAddressClaimSpec{ClassName: a.Spec.ClassName, Family: fam, AddressName: a.Name},
	}
	if err := st.k.Create(ctx, obj); err != nil {
		return err
	}
	st.claim = append(st.claim, c)
	return nil
}

func (st *storm) editable() class {
	var out []class
	for _, c := range Classes {
		if c.Editable {
			out = append(out, c)
		}
	}
	c := out[st.pick(len(out))]
	st.opClass = c.Name
	return c
}

// setClass gives a class n addresses per family and w warm reservations.
func (st *storm) setClass(ctx context.Context, c class, n, w int) error {
	cur := &iadv1alpha1.IPAddressClass{}
	if err := st.k.Get(ctx, client.ObjectKey{Name: c.Name}, cur); err != nil {
		return err
	}
	base := cur.DeepCopy()
	cur.Spec.Parameters = c.Object(n, w).Spec.Parameters
	if err := st.k.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	st.edit[c.Name], st.warm[c.Name] = n, w
	return nil
}

func (st *storm) setClassSize(ctx context.Context, c class, n int) error {
	return st.setClass(ctx, c, n, st.warm[c.Name])
}

// warmClasses is what each class that may have warm reservations asks
// for now.
func (st *storm) warmClasses() map[string]WarmClass {
	out := map[string]WarmClass{steadyWarm.Name: {Size: steadyWarm.Wide, Warm: steadyWarm.Warm}}
	for _, c := range Classes {
		if c.Warm > 0 {
			out[c.Name] = WarmClass{Size: st.edit[c.Name], Warm: st.warm[c.Name]}
		}
	}
	return out
}

// classWarm changes how many warm reservations a class keeps, from none
// to one more than it starts with: warm addresses are drawn, dropped and
// bound to claims while everything else goes on.
func (st *storm) classWarm(ctx context.Context) error {
	var warm []class
	for _, c := range Classes {
		if c.Warm > 0 {
			warm = append(warm, c)
		}
	}
	if len(warm) == 0 {
		return nil // no class of this run keeps warm reservations
	}
	c := warm[st.pick(len(warm))]
	st.opClass = c.Name
	return st.setClass(ctx, c, st.edit[c.Name], st.pick(c.Warm+2))
}

// classGrow widens a class's ranges.
func (st *storm) classGrow(ctx context.Context) error {
	c := st.editable()
	return st.setClassSize(ctx, c, c.Wide)
}

// classRecreate deletes a class and creates it again, with the same name
// and parameters, a moment later. Deleting a class revokes nothing: its
// bindings, attachments and holds must survive (the driver keeps the class's
// pool for its addresses), and claims created meanwhile wait with
// ClassNotFound until it is back. The class is always created again, even
// if this operation's context ends, so the run's invariants hold.
func (st *storm) classRecreate(ctx context.Context) error {
	c := st.editable()
	if err := st.k.Delete(ctx, &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: c.Name}}); client.IgnoreNotFound(err) != nil {
		return err
	}
	gap := time.Duration(st.pick(3000)) * time.Millisecond
	bg := context.Background()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := st.k.Get(bg, client.ObjectKey{Name: c.Name}, &iadv1alpha1.IPAddressClass{})
		if apierrors.IsNotFound(err) || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(gap)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		err := st.k.Create(bg, c.Object(st.edit[c.Name], st.warm[c.Name]))
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// classShrink narrows a class's ranges, which would drop the live
// addresses of the top half: the driver must refuse it or report them Lost.
func (st *storm) classShrink(ctx context.Context) error {
	c := st.editable()
	return st.setClassSize(ctx, c, c.Narrow)
}

func (st *storm) placeholders(ctx context.Context) ([]corev1.Service, error) {
	list := &corev1.ServiceList{}
	if err := st.k.List(ctx, list, client.InNamespace(cluster.DriverNamespace), client.HasLabels{marks.LabelPlaceholder}); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

func (st *storm) placeholderDelete(ctx context.Context) error {
	list, err := st.placeholders(ctx)
	if err != nil || len(list) == 0 {
		return err
	}
	p := list[st.pick(len(list))]
	return st.k.Delete(ctx, &p)
}

// placeholderEdit damages a placeholder by hand: its pin removed, or moved
// to another address of the soak's ranges, or its sharing key removed.
func (st *storm) placeholderEdit(ctx context.Context) error {
	list, err := st.placeholders(ctx)
	if err != nil || len(list) == 0 {
		return err
	}
	p := list[st.pick(len(list))]
	var patch string
	switch st.pick(3) {
	case 0:
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, marks.KeyPin)
	case 1:
		ips := IngressIPs(&p)
		if len(ips) == 0 {
			return nil
		}
		a := netip.MustParseAddr(ips[0])
		for i := 0; i < 1+st.pick(3); i++ {
			a = a.Next()
		}
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, marks.KeyPin, a.String())
	default:
		patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, marks.KeySharing)
	}
	return st.k.Patch(ctx, &p, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// poolEdit narrows a rendered pool by hand to its first range only.
func (st *storm) poolEdit(ctx context.Context) error {
	c := Classes[st.pick(len(Classes))]
	st.opClass = c.Name
	pool := &metallbv1beta1.IPAddressPool{}
	if err := st.k.Get(ctx, client.ObjectKey{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(c.Name)}, pool); err != nil {
		return err
	}
	if len(pool.Spec.Addresses) < 2 {
		return nil
	}
	base := pool.DeepCopy()
	pool.Spec.Addresses = pool.Spec.Addresses[:1]
	return st.k.Patch(ctx, pool, client.MergeFrom(base))
}

func (st *storm) poolDelete(ctx context.Context) error {
	c := Classes[st.pick(len(Classes))]
	st.opClass = c.Name
	return st.k.Delete(ctx, &metallbv1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.MetalLBNamespace, Name: names.PoolName(c.Name)}})
}

// rogueCreate is an admin pinning a Service of their own to a ledger IP.
func (st *storm) rogueCreate(ctx context.Context) error {
	if len(st.rogue) >= maxRogues {
		return st.rogueDelete(ctx)
	}
	list, err := st.addresses(ctx)
	if err != nil || len(list) == 0 {
		return err
	}
	a := list[st.pick(len(list))]
	fam := iadv1alpha1.FamilyIPv4
	if ip, err := netip.ParseAddr(a.Spec.Address); err == nil && ip.Is6() {
		fam = iadv1alpha1.FamilyIPv6
	}
	s := serviceFor(Rogue, st.name("rogue"), claimRec{family: fam}, shapeShared)
	delete(s.Annotations, iadv1alpha1.ServiceClaimAnnotation)
	s.Annotations[marks.KeyPin] = a.Spec.Address
	if err := st.k.Create(ctx, s); err != nil {
		return err
	}
	st.rogue = append(st.rogue, client.ObjectKeyFromObject(s))
	return nil
}

func (st *storm) rogueDelete(ctx context.Context) error {
	if len(st.rogue) == 0 {
		return nil
	}
	key := st.rogue[0]
	st.rogue = st.rogue[1:]
	return st.k.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
}

// cleanup removes the causes an admin would remove once the storm is over:
// rogue Services go and editable classes are widened again. Everything else
// (deleted pools, damaged placeholders, kills) the driver must repair alone.
func (st *storm) cleanup(ctx context.Context) error {
	for len(st.rogue) > 0 {
		if err := st.rogueDelete(ctx); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, c := range Classes {
		if c.Editable && st.edit[c.Name] != c.Wide {
			if err := st.setClassSize(ctx, c, c.Wide); err != nil {
				return err
			}
		}
	}
	return nil
}
