package draw

import (
	"fmt"

	iadv1alpha1 "github.com/cozystack/metallb-iad/api/v1alpha1"
)

// BindingWords says in words what an IPAddress is bound to.
func BindingWords(a *iadv1alpha1.IPAddress) string {
	r := a.Spec.ClaimRef
	if r == nil {
		phase := string(a.Status.Phase)
		if phase == "" {
			phase = "no phase yet"
		}
		return fmt.Sprintf("is bound to no claim (%s)", phase)
	}
	if r.UID == "" {
		return fmt.Sprintf("is bound to claim %s/%s", r.Namespace, r.Name)
	}
	return fmt.Sprintf("is bound to claim %s/%s (uid %s)", r.Namespace, r.Name, r.UID)
}
