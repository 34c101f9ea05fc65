package classparams

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sjson "sigs.k8s.io/json"
)

// Advertisement is how MetalLB announces a class's addresses.
type Advertisement string

const (
	// AdvertisementL2 renders an L2Advertisement (ARP/NDP). The default.
	AdvertisementL2 Advertisement = "L2"
	// AdvertisementBGP renders a BGPAdvertisement.
	AdvertisementBGP Advertisement = "BGP"
)

// Parameters are a class's validated spec.parameters.
type Parameters struct {
	// Addresses are the class's ranges in the order given, canonical and
	// pairwise disjoint.
	Addresses []AddressRange
	// AvoidBuggyIPs is passed through to the pool: MetalLB then skips the
	// .0 and .255 addresses of IPv4 ranges.
	AvoidBuggyIPs bool
	// Advertisement is L2 or BGP.
	Advertisement Advertisement
	// BGP holds the BGPAdvertisement options; nil for L2 or when none are given.
	BGP *BGPParameters
	// L2 holds the L2Advertisement options; nil for BGP or when none are given.
	L2 *L2Parameters
	// WarmAddresses is how many Available addresses of each family the
	// class has ranges of the driver keeps allocated ahead of any claim,
	// so a burst of claims binds without waiting for MetalLB. 0 (the
	// default) keeps none.
	WarmAddresses int32
	// AdoptExisting imports the addresses MetalLB already assigned, from
	// the class's ranges, to plain Services (see the service controller).
	AdoptExisting bool
	// Tenancy says which namespaces may claim from the class, and how many
	// of its addresses each may hold.
	Tenancy
}

// MaxWarmAddresses bounds warmAddresses: every warm address is a held
// placeholder Service, and a burst larger than this is better served by
// MetalLB's own pace than by thousands of idle reservations.
const MaxWarmAddresses = 1024

// BGPParameters are passed through to the class's BGPAdvertisement.
type BGPParameters struct {
	// Peers limits the announcement to these BGPPeer names; empty means all peers.
	Peers []string `json:"peers,omitempty"`
	// Communities are BGP communities ("65000:100", "large:1:2:3") or names
	// of MetalLB Community resources.
	Communities []string `json:"communities,omitempty"`
	// LocalPref is the BGP LOCAL_PREF attribute.
	LocalPref uint32 `json:"localPref,omitempty"`
	// AggregationLength is the prefix length IPv4 addresses are announced with (default 32).
	AggregationLength *int32 `json:"aggregationLength,omitempty"`
	// AggregationLengthV6 is the prefix length IPv6 addresses are announced with (default 128).
	AggregationLengthV6 *int32 `json:"aggregationLengthV6,omitempty"`
}

// L2Parameters are passed through to the class's L2Advertisement.
type L2Parameters struct {
	// Interfaces limits the announcement to these node interfaces; empty means all.
	Interfaces []string `json:"interfaces,omitempty"`
	// NodeSelectors limits the nodes that announce; empty means all nodes.
	NodeSelectors []metav1.LabelSelector `json:"nodeSelectors,omitempty"`
}

// wireParameters is spec.parameters as written; every key is optional here
// so that missing ones get a clear message of their own.
type wireParameters struct {
	Addresses     []string       `json:"addresses"`
	AvoidBuggyIPs bool           `json:"avoidBuggyIPs"`
	Advertisement *string        `json:"advertisement"`
	BGP           *BGPParameters `json:"bgp"`
	L2            *L2Parameters  `json:"l2"`
	WarmAddresses *int32         `json:"warmAddresses"`
	AdoptExisting bool           `json:"adoptExisting"`

	Namespaces               []string               `json:"namespaces"`
	NamespaceSelectors       []metav1.LabelSelector `json:"namespaceSelectors"`
	MaxAddressesPerNamespace *int32                 `json:"maxAddressesPerNamespace"`
}

const paramsPath = "spec.parameters"

// ParseParameters turns a class's spec.parameters into validated
// Parameters. It makes no API calls. The error lists every problem found,
// each prefixed by the path of the offending field, in words meant for the
// person who wrote the class.
//
// The decoding is strict: keys are case-sensitive, unknown and duplicate
// keys are refused (at the top level and inside bgp and l2), and values of
// the wrong type are refused.
func ParseParameters(raw *apiextensionsv1.JSON) (Parameters, error) {
	if raw == nil || len(raw.Raw) == 0 || string(raw.Raw) == "null" {
		return Parameters{}, fmt.Errorf("%s is missing: it must list the class's addresses, e.g. {\"addresses\": [\"192.0.2.0/24\"]}", paramsPath)
	}
	var w wireParameters
	strict, err := k8sjson.UnmarshalStrict(raw.Raw, &w)
	if err != nil {
		return Parameters{}, decodeError(err)
	}
	var problems []string
	for _, e := range strict {
		problems = append(problems, strictProblem(e))
	}

	p := Parameters{AvoidBuggyIPs: w.AvoidBuggyIPs, Advertisement: AdvertisementL2, BGP: w.BGP, L2: w.L2, AdoptExisting: w.AdoptExisting}
	problems = append(problems, p.parseAddresses(w.Addresses)...)

	if w.Advertisement != nil {
		switch a := Advertisement(*w.Advertisement); a {
		case AdvertisementL2, AdvertisementBGP:
			p.Advertisement = a
		default:
			problems = append(problems, fmt.Sprintf("%s.advertisement: %q is not supported; use %q (the default) or %q", paramsPath, *w.Advertisement, AdvertisementL2, AdvertisementBGP))
		}
	}
	switch {
	case p.Advertisement == AdvertisementL2 && p.BGP != nil:
		problems = append(problems, fmt.Sprintf("%s.bgp is set but the advertisement is %s; set advertisement: BGP or remove bgp", paramsPath, p.Advertisement))
	case p.Advertisement == AdvertisementBGP && p.L2 != nil:
		problems = append(problems, fmt.Sprintf("%s.l2 is set but the advertisement is BGP; set advertisement: L2 or remove l2", paramsPath))
	}
	if p.BGP != nil {
		problems = append(problems, p.BGP.validate(p.Addresses)...)
	}
	if p.L2 != nil {
		problems = append(problems, p.L2.validate()...)
	}
	if w.WarmAddresses != nil {
		p.WarmAddresses = *w.WarmAddresses
		problems = append(problems, validateWarm(p.WarmAddresses, p.Addresses)...)
	}
	problems = append(problems, p.parseTenancy(w)...)
	if len(problems) > 0 {
		return Parameters{}, errors.New(strings.Join(problems, "; "))
	}
	return p, nil
}

func (p *Parameters) parseAddresses(in []string) []string {
	if len(in) == 0 {
		return []string{fmt.Sprintf("%s.addresses is required: list at least one CIDR or range, e.g. [\"192.0.2.0/24\"]", paramsPath)}
	}
	var problems []string
	var pos []int // pos[k] is the input index of p.Addresses[k]
	for i, s := range in {
		r, err := ParseAddressRange(s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s.addresses[%d]: %v", paramsPath, i, err))
			continue
		}
		for k, prev := range p.Addresses {
			if r.overlaps(prev) {
				problems = append(problems, fmt.Sprintf("%s.addresses[%d] (%s) overlaps addresses[%d] (%s)", paramsPath, i, r, pos[k], prev))
				break
			}
		}
		p.Addresses = append(p.Addresses, r)
		pos = append(pos, i)
	}
	if len(problems) > 0 {
		p.Addresses = nil
	}
	return problems
}

// validateWarm checks warmAddresses: from 0 to MaxWarmAddresses, and no
// more than any family of the class's ranges holds (the driver keeps that
// many of each family).
func validateWarm(n int32, addrs []AddressRange) []string {
	if n < 0 || n > MaxWarmAddresses {
		return []string{fmt.Sprintf("%s.warmAddresses: %d is not a number of addresses from 0 to %d", paramsPath, n, MaxWarmAddresses)}
	}
	v4, v6 := FamilySizes(addrs)
	for _, f := range []struct {
		name string
		size float64
	}{{"IPv4", v4}, {"IPv6", v6}} {
		if f.size > 0 && float64(n) > f.size {
			return []string{fmt.Sprintf("%s.warmAddresses: %d is more than the %.0f %s addresses of the class", paramsPath, n, f.size, f.name)}
		}
	}
	return nil
}

func (b *BGPParameters) validate(addrs []AddressRange) []string {
	var problems []string
	problems = append(problems, duplicates(paramsPath+".bgp.peers", b.Peers)...)
	problems = append(problems, duplicates(paramsPath+".bgp.communities", b.Communities)...)
	for i, p := range b.Peers {
		if p == "" {
			problems = append(problems, fmt.Sprintf("%s.bgp.peers[%d] is empty", paramsPath, i))
		}
	}
	for i, c := range b.Communities {
		if err := checkCommunity(c); err != nil {
			problems = append(problems, fmt.Sprintf("%s.bgp.communities[%d]: %v", paramsPath, i, err))
		}
	}
	for _, f := range []struct {
		name string
		val  *int32
		v4   bool
	}{{"aggregationLength", b.AggregationLength, true}, {"aggregationLengthV6", b.AggregationLengthV6, false}} {
		if f.val == nil {
			continue
		}
		bits := 128
		if f.v4 {
			bits = 32
		}
		l := int(*f.val)
		if l < 0 || l > bits {
			problems = append(problems, fmt.Sprintf("%s.bgp.%s: %d is not a prefix length from 0 to %d", paramsPath, f.name, l, bits))
			continue
		}
		for i, r := range addrs {
			if r.Is4() != f.v4 {
				continue
			}
			if w := widestPrefix(r); l < w {
				problems = append(problems, fmt.Sprintf("%s.bgp.%s: %d is shorter than the /%d prefix of addresses[%d] (%s); it would announce addresses outside the class", paramsPath, f.name, l, w, i, r))
				break
			}
		}
	}
	return problems
}

func (l *L2Parameters) validate() []string {
	var problems []string
	problems = append(problems, duplicates(paramsPath+".l2.interfaces", l.Interfaces)...)
	for i, s := range l.Interfaces {
		if s == "" {
			problems = append(problems, fmt.Sprintf("%s.l2.interfaces[%d] is empty", paramsPath, i))
		}
	}
	for i := range l.NodeSelectors {
		if _, err := metav1.LabelSelectorAsSelector(&l.NodeSelectors[i]); err != nil {
			problems = append(problems, fmt.Sprintf("%s.l2.nodeSelectors[%d]: %v", paramsPath, i, err))
		}
		for j := range i {
			if reflect.DeepEqual(l.NodeSelectors[i], l.NodeSelectors[j]) {
				problems = append(problems, fmt.Sprintf("%s.l2.nodeSelectors[%d] repeats nodeSelectors[%d]", paramsPath, i, j))
				break
			}
		}
	}
	return problems
}

// duplicates reports values listed more than once (MetalLB refuses them).
func duplicates(path string, vals []string) []string {
	var problems []string
	for i, v := range vals {
		if j := slices.Index(vals[:i], v); j >= 0 {
			problems = append(problems, fmt.Sprintf("%s[%d] repeats %q", path, i, v))
		}
	}
	return problems
}

// checkCommunity accepts the forms MetalLB does: "<0-65535>:<0-65535>",
// "large:<uint32>:<uint32>:<uint32>", or the name of a Community resource
// (a value without a colon).
func checkCommunity(c string) error {
	f := strings.Split(c, ":")
	switch {
	case c == "":
		return errors.New("is empty")
	case len(f) == 1:
		return nil // the name of a MetalLB Community resource
	case len(f) == 2:
		for _, s := range f {
			if _, err := strconv.ParseUint(s, 10, 16); err != nil {
				return fmt.Errorf("%q is not a community: both halves of <as>:<value> must be numbers from 0 to 65535", c)
			}
		}
		return nil
	case len(f) == 4 && f[0] == "large":
		for _, s := range f[1:] {
			if _, err := strconv.ParseUint(s, 10, 32); err != nil {
				return fmt.Errorf("%q is not a large community: its three parts must be numbers from 0 to 4294967295", c)
			}
		}
		return nil
	default:
		return fmt.Errorf("%q is not a community: write <as>:<value>, large:<global>:<data1>:<data2>, or the name of a Community resource", c)
	}
}

// strictProblem words an unknown or duplicate key found by the strict decoder.
func strictProblem(err error) string {
	fe, ok := err.(k8sjson.FieldError)
	if !ok {
		return fmt.Sprintf("%s: %v", paramsPath, err)
	}
	path := fe.FieldPath()
	parent, key := paramsPath, path
	if i := strings.LastIndex(path, "."); i >= 0 {
		parent, key = paramsPath+"."+path[:i], path[i+1:]
	}
	if strings.HasPrefix(err.Error(), "duplicate field") {
		return fmt.Sprintf("%s: key %q is given twice", parent, key)
	}
	return fmt.Sprintf("%s: unknown key %q", parent, key)
}

// decodeError words a JSON syntax or type error.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s is not valid JSON: %v", paramsPath, err)
	}
	path := paramsPath
	if te.Field != "" {
		path += "." + te.Field
	}
	want := describeType(te.Type)
	if listOfStrings[te.Field] && te.Type.Kind() == reflect.String {
		want = "a list of strings"
		return fmt.Errorf("%s: expected %s, got a list containing %s", path, want, describeValue(te.Value))
	}
	return fmt.Errorf("%s: expected %s, got %s", path, want, describeValue(te.Value))
}

// listOfStrings are the fields whose elements are strings.
var listOfStrings = map[string]bool{
	"addresses":       true,
	"namespaces":      true,
	"bgp.peers":       true,
	"bgp.communities": true,
	"l2.interfaces":   true,
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Uint32:
		return "an integer from 0 to 4294967295"
	case reflect.Int32:
		return "an integer from -2147483648 to 2147483647"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return t.String()
	}
}

// describeValue words encoding/json's description of the value it met
// ("string", "number -1", "array", "object", "bool").
func describeValue(v string) string {
	switch {
	case v == "string":
		return "a string"
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case v == "bool":
		return "true or false"
	case v == "number":
		return "a number"
	case strings.HasPrefix(v, "number "):
		return strings.TrimPrefix(v, "number ")
	default:
		return v
	}
}
