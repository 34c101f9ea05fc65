package class

import "sigs.k8s.io/controller-runtime/pkg/client"

// toWithdraw picks the candidates of one kind to delete: each name once,
// none in kept ("<Kind>/<name>").
func toWithdraw(kind string, candidates []client.Object, kept map[string]bool) []client.Object {
	var out []client.Object
	seen := map[string]bool{}
	for _, o := range candidates {
		key := kind + "/" + o.GetName()
		if kept[key] || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, o)
	}
	return out
}
