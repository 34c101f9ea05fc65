package classparams

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestTenancy(t *testing.T) {
	type probe struct {
		ns     string
		labels map[string]string
		admits bool
	}
	tests := []struct {
		name   string
		in     string
		err    string
		max    int32
		probes []probe
	}{
		{name: "absent: every namespace, no bound", in: `{"addresses": ["192.0.2.0/24"]}`,
			probes: []probe{{"any", nil, true}}},
		{name: "by name", in: `{"addresses": ["192.0.2.0/24"], "namespaces": ["team-a", "team-b"]}`,
			probes: []probe{{"team-a", nil, true}, {"team-b", map[string]string{"x": "y"}, true}, {"team-c", nil, false}}},
		{name: "by label, or by name",
			in: `{"addresses": ["192.0.2.0/24"], "namespaces": ["ops"], "namespaceSelectors": [{"matchLabels": {"tier": "gold"}},
				{"matchExpressions": [{"key": "plan", "operator": "In", "values": ["paid", "trial"]}]}]}`,
			probes: []probe{
				{"team-a", map[string]string{"tier": "gold"}, true},
				{"team-b", map[string]string{"plan": "trial"}, true},
				{"team-c", map[string]string{"tier": "silver"}, false},
				{"team-d", nil, false},
				{"ops", nil, true},
			}},
		{name: "a bound", in: `{"addresses": ["192.0.2.0/24"], "maxAddressesPerNamespace": 4}`, max: 4,
			probes: []probe{{"any", nil, true}}},
		{name: "a bound of 0", in: `{"addresses": ["192.0.2.0/24"], "maxAddressesPerNamespace": 0}`,
			err: "spec.parameters.maxAddressesPerNamespace: 0 is not a number of addresses of 1 or more"},
		{name: "a bound beside warm addresses", in: `{"addresses": ["192.0.2.0/24"], "warmAddresses": 2, "maxAddressesPerNamespace": 4}`,
			err: "maxAddressesPerNamespace cannot be set with warmAddresses"},
		{name: "a namespace that cannot be one", in: `{"addresses": ["192.0.2.0/24"], "namespaces": ["Team_A"]}`,
			err: `spec.parameters.namespaces[0]: "Team_A" is not a namespace name`},
		{name: "a namespace twice", in: `{"addresses": ["192.0.2.0/24"], "namespaces": ["a", "a"]}`,
			err: `spec.parameters.namespaces[1] repeats "a"`},
		{name: "a selector of every namespace", in: `{"addresses": ["192.0.2.0/24"], "namespaceSelectors": [{}]}`,
			err: "spec.parameters.namespaceSelectors[0] selects every namespace"},
		{name: "a bad selector", in: `{"addresses": ["192.0.2.0/24"], "namespaceSelectors": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}`,
			err: "spec.parameters.namespaceSelectors[0]:"},
		{name: "namespaces not a list", in: `{"addresses": ["192.0.2.0/24"], "namespaces": "team-a"}`,
			err: "spec.parameters.namespaces: expected a list of strings"},
		{name: "an unknown key beside them", in: `{"addresses": ["192.0.2.0/24"], "namespace": ["team-a"]}`,
			err: `unknown key "namespace"`},
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
			assert.Equal(t, tt.max, p.MaxAddressesPerNamespace)
			for _, pr := range tt.probes {
				assert.Equal(t, pr.admits, p.Admits(pr.ns, pr.labels), "namespace %s %v", pr.ns, pr.labels)
			}
		})
	}
}
