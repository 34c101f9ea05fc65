package ipaddress

import "github.com/cozystack/metallb-iad/test/fixture"

// The plan tests' objects (fixture).
const phNS = fixture.PlanNamespace

var (
	address    = fixture.PlanAddress
	bound      = fixture.Bound
	associated = fixture.Associated
	svc        = fixture.PlanService
	svcNames   = fixture.ServiceNames
)
