package marks

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
