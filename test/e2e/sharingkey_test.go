package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/controllers/service"
	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/sharingkey"
	"github.com/cozystack/metallb-iad/test/cluster"
)

// sharingSecretKey is the sharing-key Secret of the local stack.
var sharingSecretKey = client.ObjectKey{Namespace: cluster.DriverNamespace, Name: cluster.SharingKeySecret}

// readSharingSecret reads the key bytes of the sharing-key Secret.
func (k *kit) readSharingSecret(t require.TestingT) []byte {
	s := &corev1.Secret{}
	require.NoError(t, k.k.Get(k.ctx, sharingSecretKey, s))
	return s.Data[sharingkey.Field]
}

// keyStamps returns the sharing key each Service of the kit's namespace and
// each hold placeholder of addrs carries, by namespace/name ("" for none).
func (k *kit) keyStamps(t require.TestingT, addrs []*iadv1alpha1.IPAddress) map[string]string {
	out := map[string]string{}
	list := &corev1.ServiceList{}
	require.NoError(t, k.k.List(k.ctx, list, client.InNamespace(k.ns)))
	for _, s := range list.Items {
		out[s.Namespace+"/"+s.Name] = s.Annotations[marks.KeySharing]
	}
	for _, a := range addrs {
		for _, ph := range k.placeholdersOf(t, a.Name) {
			out[ph.Namespace+"/"+ph.Name] = ph.Annotations[marks.KeySharing]
		}
	}
	return out
}

// assertStampedWith asserts that every Service and hold of the claims that
// carries a key carries the one secret derives for its claim, and that at
// least one does.
func (k *kit) assertStampedWith(t *assert.CollectT, secret []byte, addrs []*iadv1alpha1.IPAddress) {
	keys := sharingkey.NewKeys(secret)
	stamped := 0
	for _, a := range addrs {
		want := keys.Of(k.readAddress(t, a.Name))
		for _, ph := range k.placeholdersOf(t, a.Name) {
			if got := ph.Annotations[marks.KeySharing]; got != "" {
				assert.Equal(t, want, got, "hold %s of %s", ph.Name, a.Name)
				stamped++
			}
		}
		if w := k.readAddress(t, a.Name).Status.AssociatedTo; w != nil {
			if got := k.readService(t, w.Name).Annotations[marks.KeySharing]; got != "" {
				assert.Equal(t, want, got, "Service %s attached to %s", w.Name, a.Name)
				stamped++
			}
		}
	}
	assert.Positive(t, stamped, "the shared attachments carry keys")
}

// TestSharingKeyNeverSplits: without the parking pool the driver hands
// addresses over by sharing them, so the hold and the attached Service
// carry the claim's key. The sharing-key Secret deleted under the running
// controllers comes back with the same key and nothing is re-keyed, even
// across a restart; the key replaced on purpose is followed by every
// controller (a new attachment shares under it) with no address lost, and
// once the pairs of before let go every holder carries the new key; then
// restarts and an attach and detach storm, with no Warning anywhere.
func TestSharingKeyNeverSplits(t *testing.T) {
	needLocal(t)
	story(t, "sharing-key", "the sharing key is never split: deleted, rotated, restarted", "sharing-key", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.withoutParking()
		k.sharedHandoffRace = true
		k.class("e2e-sharing-key", "", "198.51.100.160/28")
		const claims = 4
		var addrs []*iadv1alpha1.IPAddress
		for i := 0; i < claims; i++ {
			addrs = append(addrs, k.provisioned(fmt.Sprintf("c%d", i), "e2e-sharing-key", iadv1alpha1.FamilyIPv4)...)
		}
		// Half attached with the shared handoff, half held.
		for i := 0; i < claims/2; i++ {
			k.create(sharedLB(k.ns, fmt.Sprintf("s%d", i), fmt.Sprintf("c%d", i)))
			k.assertAssociated(fmt.Sprintf("s%d", i), fmt.Sprintf("c%d", i), addrs[i].Spec.Address, addrs[i])
		}
		secret := k.readSharingSecret(t)
		assert.EventuallyWithT(t, func(t *assert.CollectT) { k.assertStampedWith(t, secret, addrs[:claims/2]) }, wait, tick)
		before := k.keyStamps(t, addrs)

		// 1. Deleted: the running controllers create it again with their key.
		require.NoError(t, k.k.Delete(ctx, &corev1.Secret{ObjectMeta: metadata(sharingSecretKey)}))
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			s := &corev1.Secret{}
			err := k.k.Get(ctx, sharingSecretKey, s)
			if assert.NoError(t, err) {
				assert.Equal(t, secret, s.Data[sharingkey.Field], "the Secret came back with the key the controllers hold")
			}
		}, wait, tick)
		// A controller started after reads that same key: nothing re-keyed.
		require.NoError(t, k.fleet.restart(ctx, "ipaddress"))
		k.attachedOrHeld(addrs, claims/2)
		assert.Equal(t, before, k.keyStamps(t, addrs), "nothing was re-keyed")

		// 2. Rotated: every controller follows. A pair that shares an
		// address keeps the key it shares under until the Service lets the
		// address go (marks.PairKey: neither side can be re-keyed first
		// without MetalLB refusing one), so nothing attached moves; what
		// attaches next shares under the new key.
		rotated := newSecret(t)
		s := &corev1.Secret{}
		require.NoError(t, k.k.Get(ctx, sharingSecretKey, s))
		s.Data[sharingkey.Field] = rotated
		require.NoError(t, k.k.Update(ctx, s))
		k.create(sharedLB(k.ns, "s2", "c2"))
		k.assertAssociated("s2", "c2", addrs[2].Spec.Address, addrs[2])
		assert.EventuallyWithT(t, func(t *assert.CollectT) { k.assertStampedWith(t, rotated, addrs[2:3]) }, metallbWait, tick)
		k.attachedOrHeld(addrs[:2], 2)
		k.assertHeld(addrs[3].Name, addrs[3].Spec.Address)
		after := k.keyStamps(t, addrs[:2])
		for _, name := range []string{"s0", "s1"} {
			assert.Equal(t, before[k.ns+"/"+name], after[k.ns+"/"+name], "%s keeps the key it shares under", name)
		}

		// 3. One controller at a time restarted: each reads the rotated key.
		for _, c := range []string{"service", "claim", "ipaddress"} {
			require.NoError(t, k.fleet.restart(ctx, c))
		}
		assert.Equal(t, rotated, k.readSharingSecret(t), "no controller made a key of its own")

		// 4. A storm, all at once: the pairs of before the rotation detach
		// (one deleted, one let go) while their claims attach to new
		// Services and the last held claim attaches; every holder is
		// then stamped with the rotated key, or with none. MetalLB may
		// refuse a shared handoff's pin for a moment whatever the key
		// (metallbSharedHandoffRace): the story leaves that out, and counts
		// every other Warning, the driver's refusals included.
		require.NoError(t, k.k.Delete(ctx, &corev1.Service{ObjectMeta: metadata(client.ObjectKey{Namespace: k.ns, Name: "s0"})}))
		k.patchAnnotations("s1", map[string]string{iadv1alpha1.ServiceClaimAnnotation: ""})
		k.create(sharedLB(k.ns, "s3", "c3"))
		k.create(sharedLB(k.ns, "t0", "c0"))
		k.create(sharedLB(k.ns, "t1", "c1"))
		for i, svc := range []string{"t0", "t1", "s2", "s3"} {
			k.assertAssociated(svc, fmt.Sprintf("c%d", i), addrs[i].Spec.Address, addrs[i])
		}
		assert.EventuallyWithT(t, func(t *assert.CollectT) { k.assertStampedWith(t, rotated, addrs) }, metallbWait, tick)
		assert.Equal(t, rotated, k.readSharingSecret(t))
		k.noWarnings(nil, addressObjects(addrs)...)
	})
}

// attachedOrHeld waits until the first attached addresses are attached
// (to s0, s1, ...) with their IPs and the others held.
func (k *kit) attachedOrHeld(addrs []*iadv1alpha1.IPAddress, attached int) {
	k.t.Helper()
	for i, a := range addrs {
		if i < attached {
			k.assertAssociated(fmt.Sprintf("s%d", i), fmt.Sprintf("c%d", i), a.Spec.Address, a)
		} else {
			k.assertHeld(a.Name, a.Spec.Address)
		}
	}
}

func addressObjects(addrs []*iadv1alpha1.IPAddress) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, "IPAddress/"+a.Name)
	}
	return out
}

func newSecret(t *testing.T) []byte {
	raw := make([]byte, 32)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	return []byte(hex.EncodeToString(raw))
}

// metadata is the ObjectMeta of key.
func metadata(key client.ObjectKey) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
}

// TestStalledAttachSaysWhy: with the IPAddress controller down, nothing
// lets the hold go, so an attach cannot complete; after StallAfter the
// Service says what it waits for in a Warning a tenant reads with kubectl
// describe, and the attach completes once the controller is back.
func TestStalledAttachSaysWhy(t *testing.T) {
	needLocal(t)
	story(t, "stalled-attach", "an attach that waits a minute says why on the Service", "stalled-attach", func(ctx context.Context, t *testing.T, cfg *envconf.Config, k *kit) {
		k.class("e2e-stalled-attach", "", "198.51.100.176/30")
		addrs := k.provisioned("web-ip", "e2e-stalled-attach", iadv1alpha1.FamilyIPv4)
		restart, err := k.fleet.stopAll(ctx, "ipaddress")
		require.NoError(t, err)
		stopped := true
		defer func() {
			if stopped {
				require.NoError(t, restart())
			}
		}()
		k.create(lb(k.ns, "web", "web-ip"))
		assert.EventuallyWithT(t, func(t *assert.CollectT) {
			k.assertEvent(t, "Service", k.ns, "web", corev1.EventTypeWarning, service.ReasonAttachStalled,
				`claim "web-ip"`, "has not completed in 1m", "waiting for")
		}, service.StallAfter+metallbWait, tick)
		require.NoError(t, restart())
		stopped = false
		k.assertAssociated("web", "web-ip", addrs[0].Spec.Address, addrs[0])
	})
}
