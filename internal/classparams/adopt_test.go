package classparams

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestParseParametersAdoptExisting(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
		err  string
	}{
		{name: "off by default", in: `{"addresses": ["192.0.2.0/24"]}`},
		{name: "on", in: `{"addresses": ["192.0.2.0/24"], "adoptExisting": true}`, want: true},
		{name: "explicitly off", in: `{"addresses": ["192.0.2.0/24"], "adoptExisting": false}`},
		{name: "a string is refused", in: `{"addresses": ["192.0.2.0/24"], "adoptExisting": "true"}`,
			err: "spec.parameters.adoptExisting: expected true or false, got a string"},
		{name: "keys are case-sensitive", in: `{"addresses": ["192.0.2.0/24"], "AdoptExisting": true}`,
			err: `spec.parameters: unknown key "AdoptExisting"`},
		{name: "given twice", in: `{"addresses": ["192.0.2.0/24"], "adoptExisting": true, "adoptExisting": false}`,
			err: `spec.parameters: key "adoptExisting" is given twice`},
		{name: "still needs addresses", in: `{"adoptExisting": true}`,
			err: "spec.parameters.addresses is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseParameters(&apiextensionsv1.JSON{Raw: []byte(tt.in)})
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.AdoptExisting)
		})
	}
}

func TestParametersCovers(t *testing.T) {
	p, err := ParseParameters(&apiextensionsv1.JSON{Raw: []byte(`{"addresses": ["192.0.2.0/28", "198.51.100.10-198.51.100.20", "2001:db8::/126"]}`)})
	require.NoError(t, err)
	for ip, want := range map[string]bool{
		"192.0.2.0":        true,
		"192.0.2.15":       true,
		"192.0.2.16":       false,
		"198.51.100.9":     false,
		"198.51.100.10":    true,
		"198.51.100.20":    true,
		"198.51.100.21":    false,
		"::ffff:192.0.2.1": true,
		"2001:db8::3":      true,
		"2001:db8::4":      false,
		"::c000:201":       false,
	} {
		assert.Equal(t, want, p.Covers(netip.MustParseAddr(ip)), ip)
	}
}
