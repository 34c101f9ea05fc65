#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager)
# and the MetalLB controller from the Go module proxy, caches them per version
# outside the clone, and links them into bin/k8s. A warm run only links.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${METALLB_IAD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metallb-iad/tools}"
out="$root/bin/k8s"
mkdir -p "$out"

version_of() { # module path in a tools go.mod -> its required version
	(cd "$root/hack/tools/$1" && go list -m -f '{{.Version}}' "$2")
}

build() { # tools-module package binary-name version
	local mod="$1" pkg="$2" name="$3" ver="$4"
	local dir="$cache/$name-$ver"
	if [[ ! -x "$dir/$name" ]]; then
		echo "building $name $ver (cold: a few minutes)" >&2
		mkdir -p "$dir"
		(cd "$root/hack/tools/$mod" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$dir/$name.tmp" "$pkg")
		mv "$dir/$name.tmp" "$dir/$name"
	fi
	ln -sf "$dir/$name" "$out/$name"
}

# `build-tools.sh gateway` (make gateway-tools) builds the Gateway API
# implementations of the e2e feature `gateway`. Envoy Gateway: its
# controller, and the Gateway API and Envoy Gateway CRDs rendered once per
# version from the chart inside its module (helm from the Go module proxy,
# as the Makefile runs it). Contour: one binary (the gateway provisioner
# and `contour serve`), and its own CRDs from its module; it uses Envoy
# Gateway's Gateway API CRDs. `make test` and `make test-node` need it; the
# demo does not.
gateway() {
	local eg
	eg="$(version_of envoy-gateway github.com/envoyproxy/gateway)"
	build envoy-gateway github.com/envoyproxy/gateway/cmd/envoy-gateway envoy-gateway "$eg"
	if [[ ! -s "$cache/envoy-gateway-$eg/crds.yaml" ]]; then
		local egsrc
		egsrc="$(cd "$root/hack/tools/envoy-gateway" && go mod download -json github.com/envoyproxy/gateway | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
		(cd "$root" && go run "helm.sh/helm/v3/cmd/helm@${HELM_VERSION:-v3.19.5}" template eg "$egsrc/charts/gateway-crds-helm" \
			--set crds.gatewayAPI.enabled=true --set crds.envoyGateway.enabled=true) > "$cache/envoy-gateway-$eg/crds.yaml.tmp"
		mv "$cache/envoy-gateway-$eg/crds.yaml.tmp" "$cache/envoy-gateway-$eg/crds.yaml"
	fi
	ln -sf "$cache/envoy-gateway-$eg/crds.yaml" "$out/envoy-gateway-crds.yaml"

	local contour
	contour="$(version_of contour github.com/projectcontour/contour)"
	build contour github.com/projectcontour/contour/cmd/contour contour "$contour"
	if [[ ! -s "$cache/contour-$contour/crds.yaml" ]]; then
		local src
		src="$(cd "$root/hack/tools/contour" && go mod download -json github.com/projectcontour/contour | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
		cp "$src/examples/contour/01-crds.yaml" "$cache/contour-$contour/crds.yaml.tmp"
		chmod u+w "$cache/contour-$contour/crds.yaml.tmp"
		mv "$cache/contour-$contour/crds.yaml.tmp" "$cache/contour-$contour/crds.yaml"
	fi
	ln -sf "$cache/contour-$contour/crds.yaml" "$out/contour-crds.yaml"
}
if [[ "${1:-}" == gateway ]]; then
	gateway
	exit 0
fi

# METALLB_VERSION picks the MetalLB release: one module per supported
# release under hack/tools/metallb-<version>, each with its own go.sum.
metallb_version="${METALLB_VERSION:-v0.16.1}"
metallb_mod="metallb-$metallb_version"
if [[ ! -d "$root/hack/tools/$metallb_mod" ]]; then
	echo "METALLB_VERSION=$metallb_version is not one this project builds; supported:" \
		"$(cd "$root/hack/tools" && ls -d metallb-v* | sed 's/^metallb-//' | tr '\n' ' ')" >&2
	exit 2
fi

kube="$(version_of kube k8s.io/kubernetes)"
etcd="$(version_of etcd go.etcd.io/etcd/server/v3)"
metallb="$(version_of "$metallb_mod" go.universe.tf/metallb)"

# A user who already has the control plane in setup-envtest's layout
# (KUBEBUILDER_ASSETS naming a directory with kube-apiserver and etcd)
# uses it instead of building it.
assets="${KUBEBUILDER_ASSETS:-}"
if [[ -n "$assets" && -x "$assets/kube-apiserver" && -x "$assets/etcd" ]]; then
	echo "using kube-apiserver and etcd from KUBEBUILDER_ASSETS=$assets" >&2
	ln -sf "$assets/etcd" "$out/etcd"
	ln -sf "$assets/kube-apiserver" "$out/kube-apiserver"
else
	build etcd go.etcd.io/etcd/server/v3 etcd "$etcd"
	build kube k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$kube"
fi
if [[ -n "$assets" && -x "$assets/kube-controller-manager" ]]; then
	ln -sf "$assets/kube-controller-manager" "$out/kube-controller-manager"
else
	build kube k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$kube"
fi
build "$metallb_mod" go.universe.tf/metallb/controller metallb-controller "$metallb"
echo "$metallb" > "$out/metallb-version"

# MetalLB's CRDs ship inside its module, and differ between releases
# (v0.15.3 adds ConfigurationState, which its controller waits for).
crds="$(cd "$root/hack/tools/$metallb_mod" && go mod download -json go.universe.tf/metallb | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/config/crd/bases"
rm -rf "$out/metallb-crds" && mkdir -p "$out/metallb-crds"
cp "$crds"/*.yaml "$out/metallb-crds/"
chmod -R u+w "$out/metallb-crds"
