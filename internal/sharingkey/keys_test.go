package sharingkey

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestSharingKeys(t *testing.T) {
	k := Keys{}.Claim("shop", "web-ip", "3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20")
	assert.Equal(t, k, Keys{}.Claim("shop", "web-ip", "3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20"), "stable")
	assert.Regexp(t, `^metallb-iad-[0-9a-f]{32}$`, k)
	assert.LessOrEqual(t, len(k), 63)

	distinct := []string{
		k,
		Keys{}.Claim("shop", "web-ip", "another-uid"), // recreated under the same name
		Keys{}.Claim("shop", "web-ip", ""),            // uid not filled in yet
		Keys{}.Claim("shop2", "web-ip", "3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20"),
		Keys{}.Claim("shop", "web-ip2", "3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20"),
		Keys{}.Claim("sho", "pweb-ip", "3f6d3c38-5a0e-4a8c-9d2a-0d4b0c7e1f20"), // same bytes, other split
		Keys{}.Claim("", "", ""),
		Keys{}.Address("ip-203-0-113-7"),
		Keys{}.Address("ip-203-0-113-8"),
		Keys{}.Address(""),
	}
	seen := map[string]int{}
	for i, s := range distinct {
		if j, ok := seen[s]; ok {
			t.Errorf("keys %d and %d are both %s", j, i, s)
		}
		seen[s] = i
		assert.Regexp(t, `^metallb-iad-[0-9a-f]{32}$`, s)
	}
}

func TestSharingKeysKeyedBySecret(t *testing.T) {
	unkeyed := Keys{}.Address("ip-203-0-113-7")
	claim := Keys{}.Claim("shop", "web-ip", "uid-1")
	k := NewKeys([]byte("0123456789abcdef0123"))
	assert.True(t, k.Secret())
	assert.False(t, Keys{}.Secret())
	keyed := k.Address("ip-203-0-113-7")
	assert.NotEqual(t, unkeyed, keyed, "with a secret the key cannot be computed from the name")
	assert.NotEqual(t, claim, k.Claim("shop", "web-ip", "uid-1"))
	assert.Equal(t, keyed, k.Address("ip-203-0-113-7"), "stable")
	assert.Regexp(t, `^metallb-iad-[0-9a-f]{32}$`, keyed)
	assert.NotEqual(t, keyed, NewKeys([]byte("another secret, 20b")).Address("ip-203-0-113-7"), "another secret, another key")
}

func TestKeysOf(t *testing.T) {
	bound := func(name, ns, claim, uid string) *iadv1alpha1.IPAddress {
		a := &iadv1alpha1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if claim != "" {
			a.Spec.ClaimRef = &iadv1alpha1.ClaimReference{Namespace: ns, Name: claim, UID: uid}
		}
		return a
	}
	v4 := bound("ip-203-0-113-7", "shop", "web-ip", "u1")
	v6 := bound("ip6-2001-0db8-0000-0000-0000-0000-0000-0007", "shop", "web-ip", "u1")
	assert.Equal(t, Keys{}.Of(v4), Keys{}.Of(v6), "a Dual claim's two addresses share one key")
	assert.Equal(t, Keys{}.Claim("shop", "web-ip", "u1"), Keys{}.Of(v4))
	assert.NotEqual(t, Keys{}.Of(v4), Keys{}.Of(bound("ip-203-0-113-7", "shop", "web-ip", "u2")), "another claim of the same name")
	assert.NotEqual(t, Keys{}.Of(v4), Keys{}.Of(bound("ip-203-0-113-8", "shop", "api-ip", "u3")))
	free := bound("ip-203-0-113-9", "", "", "")
	assert.Equal(t, Keys{}.Address("ip-203-0-113-9"), Keys{}.Of(free), "an unbound address has a key of its own")
	assert.NotEqual(t, Keys{}.Of(free), Keys{}.Of(bound("ip-203-0-113-10", "", "", "")))
}
