#!/usr/bin/env bash
# Builds what the one-node cluster of the node e2e provider adds to the local
# control plane: kubelet, kube-proxy and kube-scheduler from the Go module
# proxy (the same Kubernetes version as kube-apiserver), cached per version
# outside the clone like hack/build-tools.sh does, and linked into bin/node.
# A warm run only links.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${METALLB_IAD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metallb-iad/tools}"
out="$root/bin/node"
mkdir -p "$out"

kube="$(cd "$root/hack/tools/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="${kube#v1.}"; minor="${minor%%.*}"
# Without these the binaries report v0.0.0-master, and the node's version
# would not match the API server's.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$kube -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

for name in kubelet kube-proxy kube-scheduler; do
	dir="$cache/$name-$kube"
	if [[ ! -x "$dir/$name" ]]; then
		echo "building $name $kube (cold: a few minutes)" >&2
		mkdir -p "$dir"
		(cd "$root/hack/tools/kube" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$name.tmp" "k8s.io/kubernetes/cmd/$name")
		mv "$dir/$name.tmp" "$dir/$name"
	fi
	ln -sf "$dir/$name" "$out/$name"
done
