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
		(cd "$root/hack/tools/$mod" && CGO_ENABLED=0 go build -trimpath -o "$dir/$name.tmp" "$pkg")
		mv "$dir/$name.tmp" "$dir/$name"
	fi
	ln -sf "$dir/$name" "$out/$name"
}

kube="$(version_of kube k8s.io/kubernetes)"
etcd="$(version_of etcd go.etcd.io/etcd/server/v3)"
metallb="$(version_of metallb go.universe.tf/metallb)"

build etcd go.etcd.io/etcd/server/v3 etcd "$etcd"
build metallb go.universe.tf/metallb/controller metallb-controller "$metallb"
build kube k8s.io/kubernetes/cmd/kube-controller-manager kube-controller-manager "$kube"
build kube k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$kube"

# MetalLB's CRDs ship inside its module.
crds="$(cd "$root/hack/tools/metallb" && go mod download -json go.universe.tf/metallb | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/config/crd/bases"
rm -rf "$out/metallb-crds" && mkdir -p "$out/metallb-crds"
cp "$crds"/*.yaml "$out/metallb-crds/"
chmod -R u+w "$out/metallb-crds"
