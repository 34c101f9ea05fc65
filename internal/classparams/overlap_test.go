package classparams

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

func TestCheckName(t *testing.T) {
	long59 := strings.Repeat("a", 59)
	long60 := strings.Repeat("a", 60)
	tests := []struct {
		name string
		err  string
	}{
		{name: "public"},
		{name: "edge.example.com"},
		{name: long59},
		{name: long60, err: `the class name "` + long60 + `" is 60 characters long; this driver serves class names of at most 59 characters, so that the pool name "iad-` + long60 + `" stays within 63`},
		{name: strings.Repeat("b", 253), err: `the class name "` + strings.Repeat("b", 253) + `" is 253 characters long; this driver serves class names of at most 59 characters, so that the pool name "iad-` + strings.Repeat("b", 253) + `" stays within 63`},
		{name: "UPPER", err: `the pool name "iad-UPPER" is not a valid object name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}
	for _, tt := range tests {
		t.Run(tt.name[:min(len(tt.name), 20)], func(t *testing.T) {
			err := CheckName(tt.name)
			if tt.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.err, err.Error())
		})
	}
}

func classAt(name string, sec int64) *iadv1alpha1.IPAddressClass {
	return &iadv1alpha1.IPAddressClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(sec, 0))}}
}

func TestCreatedBefore(t *testing.T) {
	assert.True(t, createdBefore(classAt("z", 100), classAt("a", 101)), "earlier creation wins over name")
	assert.False(t, createdBefore(classAt("a", 101), classAt("z", 100)))
	assert.True(t, createdBefore(classAt("a", 100), classAt("b", 100)), "same second: name decides")
	assert.False(t, createdBefore(classAt("b", 100), classAt("a", 100)))
	assert.False(t, createdBefore(classAt("a", 100), classAt("a", 100)), "a class is not older than itself")
}

func ranges(t *testing.T, in ...string) []AddressRange {
	t.Helper()
	var out []AddressRange
	for _, s := range in {
		r, err := ParseAddressRange(s)
		require.NoError(t, err, s)
		out = append(out, r)
	}
	return out
}

func TestFindOverlap(t *testing.T) {
	tests := []struct {
		name      string
		ours      []string
		occupants []Occupant
		err       string
	}{
		{
			name: "nothing else",
			ours: []string{"192.0.2.0/24"},
		},
		{
			name: "disjoint",
			ours: []string{"192.0.2.0/25", "2001:db8::/64"},
			occupants: []Occupant{
				{Class: "a", Ranges: ranges(t, "192.0.2.128/25")},
				{Pool: "manual", Ranges: ranges(t, "2001:db8:1::/64")},
			},
		},
		{
			name:      "older class, CIDR against range",
			ours:      []string{"198.51.100.0/24"},
			occupants: []Occupant{{Class: "gold", Ranges: ranges(t, "192.0.2.0/24", "198.51.100.200-198.51.100.210")}},
			err:       `addresses 198.51.100.0/24 overlap 198.51.100.200-198.51.100.210 of the older class "gold"; refusing to render overlapping ranges`,
		},
		{
			name:      "pool of another class",
			ours:      []string{"192.0.2.10-192.0.2.20"},
			occupants: []Occupant{{Class: "silver", Pool: "iad-silver", Ranges: ranges(t, "192.0.2.16/28")}},
			err:       `addresses 192.0.2.10-192.0.2.20 overlap 192.0.2.16/28 of IPAddressPool iad-silver (rendered for class "silver"); refusing to render overlapping ranges`,
		},
		{
			name:      "foreign pool",
			ours:      []string{"2001:db8::/64"},
			occupants: []Occupant{{Pool: "default", Ranges: ranges(t, "2001:db8::5-2001:db8::9")}},
			err:       `addresses 2001:db8::/64 overlap 2001:db8::5-2001:db8::9 of IPAddressPool default (not rendered by this driver); refusing to render overlapping ranges`,
		},
		{
			name: "the first occupant in order is named",
			ours: []string{"192.0.2.0/24"},
			occupants: []Occupant{
				{Class: "first", Ranges: ranges(t, "198.51.100.0/24")},
				{Class: "second", Ranges: ranges(t, "192.0.2.64/26")},
				{Class: "third", Ranges: ranges(t, "192.0.2.0/26")},
			},
			err: `addresses 192.0.2.0/24 overlap 192.0.2.64/26 of the older class "second"; refusing to render overlapping ranges`,
		},
		{
			name:      "families never overlap",
			ours:      []string{"0.0.0.0/0"},
			occupants: []Occupant{{Class: "v6", Ranges: ranges(t, "::/0")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := FindOverlap(ranges(t, tt.ours...), tt.occupants)
			if tt.err == "" {
				assert.Nil(t, o)
				return
			}
			require.NotNil(t, o)
			assert.Equal(t, tt.err, o.Error())
		})
	}
}

func TestPoolRanges(t *testing.T) {
	got := PoolRanges([]string{"192.0.2.0/24", "garbage", "198.51.100.7/24", "2001:db8::1-2001:db8::9", ""})
	assert.Equal(t, []AddressRange{
		rng("192.0.2.0", "192.0.2.255", "192.0.2.0/24"),
		rng("198.51.100.0", "198.51.100.255", "198.51.100.0/24"), // host bits: MetalLB reads the network
		rng("2001:db8::1", "2001:db8::9", "2001:db8::1-2001:db8::9"),
	}, got)
}

func TestSplitAdoptable(t *testing.T) {
	older := Occupant{Class: "gold", Ranges: ranges(t, "192.0.2.0/28")}
	ours := Occupant{Class: "silver", Pool: "iad-silver", Ranges: ranges(t, "192.0.2.16/28")}
	legacy := Occupant{Pool: "legacy", Ranges: ranges(t, "192.0.2.32/28")}
	tests := []struct {
		name                string
		adopt               bool
		refusing, adoptable []Occupant
	}{
		{name: "without adoptExisting every occupant refuses", refusing: []Occupant{older, ours, legacy}},
		{name: "with adoptExisting a pool the driver did not render may be overlapped", adopt: true,
			refusing: []Occupant{older, ours}, adoptable: []Occupant{legacy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refusing, adoptable := SplitAdoptable([]Occupant{older, ours, legacy}, tt.adopt)
			assert.Equal(t, tt.refusing, refusing)
			assert.Equal(t, tt.adoptable, adoptable)
		})
	}
}

func TestAdoptOverlapMessage(t *testing.T) {
	o := FindOverlap(ranges(t, "192.0.2.0/24"), []Occupant{{Pool: "legacy", Ranges: ranges(t, "192.0.2.32/28")}})
	require.NotNil(t, o)
	msg := AdoptOverlapMessage(o, "metallb-system/iad-public")
	for _, part := range []string{"192.0.2.32/28", "IPAddressPool legacy (not rendered by this driver)", "adoptExisting",
		"keeps serving the last valid one", "remove the class's ranges from legacy"} {
		assert.Contains(t, msg, part)
	}
}
