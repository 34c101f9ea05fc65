package claim

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cozystack/metallb-iad/internal/marks"
	"github.com/cozystack/metallb-iad/internal/names"
)

// retargeted reports whether ph is an allocation placeholder still drawing
// for another class than class, the one the claim names now.
func retargeted(ph *corev1.Service, class string) bool {
	return ph != nil && ph.Labels[marks.LabelPlaceholder] == names.PlaceholderAllocation &&
		ph.Labels[marks.LabelAddress] == "" && ph.DeletionTimestamp == nil &&
		ph.Annotations[marks.KeyClass] != "" && ph.Annotations[marks.KeyClass] != class
}
