package class

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cozystack/metallb-iad/internal/classparams"
)

var (
	renderedClasses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_class_rendered",
		Help: "1 for each class of this driver whose current parameters are rendered into MetalLB.",
	}, []string{"class"})

	refusedClasses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_class_refused",
		Help: "1 for each class of this driver whose current parameters are refused, labelled with the Event reason; its previous rendering, if any, stays in place.",
	}, []string{"class", "reason"})

	classAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "metallb_iad_class_addresses",
		Help: "Number of addresses in a class's ranges per family (IPv4, IPv6); a float64, approximate above 2^53.",
	}, []string{"class", "family"})
)

func init() {
	metrics.Registry.MustRegister(renderedClasses, refusedClasses, classAddresses)
}

// recordRendered marks a class rendered with its address counts.
func recordRendered(class string, p classparams.Parameters) {
	refusedClasses.DeletePartialMatch(prometheus.Labels{"class": class})
	renderedClasses.WithLabelValues(class).Set(1)
	recordAddresses(class, p)
}

// recordRefused marks a class refused for one reason. p is nil when the
// parameters themselves could not be parsed.
func recordRefused(class, reason string, p *classparams.Parameters) {
	renderedClasses.DeleteLabelValues(class)
	refusedClasses.DeletePartialMatch(prometheus.Labels{"class": class})
	refusedClasses.WithLabelValues(class, reason).Set(1)
	if p != nil {
		recordAddresses(class, *p)
	} else {
		classAddresses.DeletePartialMatch(prometheus.Labels{"class": class})
	}
}

func recordAddresses(class string, p classparams.Parameters) {
	v4, v6 := classparams.FamilySizes(p.Addresses)
	classAddresses.WithLabelValues(class, "IPv4").Set(v4)
	classAddresses.WithLabelValues(class, "IPv6").Set(v6)
}

// forget drops every series of a class that is gone or not ours.
func forget(class string) {
	renderedClasses.DeleteLabelValues(class)
	refusedClasses.DeletePartialMatch(prometheus.Labels{"class": class})
	classAddresses.DeletePartialMatch(prometheus.Labels{"class": class})
}
