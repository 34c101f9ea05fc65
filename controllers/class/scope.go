package class

import (
	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
	"github.com/cozystack/metallb-iad/internal/classparams"
)

// scope is one pass over a class.
type scope struct {
	// name is the class's; class is nil when it is gone.
	name  string
	class *iadv1alpha1.IPAddressClass
	// params are the admitted parameters (admit).
	params classparams.Parameters
}
