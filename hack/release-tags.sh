#!/usr/bin/env bash
# What one push publishes, as GitHub Actions outputs (key=value lines):
#   version  the release x.y.z of a vX.Y.Z tag (empty on main): the chart
#            version, its appVersion and so its default image tag;
#   tags     the image references to push, comma-separated.
# A vX.Y.Z tag publishes X.Y.Z and X.Y (a pre-release, vX.Y.Z-rc.1, only
# itself); main publishes main and main-<short sha>.
# The release workflow runs it first, in a job every other job needs, so a
# tag that is not a release fails before any test runs. X.Y.Z is semver 2.0
# (no leading zeros; pre-release identifiers non-empty) without build
# metadata, which an image tag cannot carry; the Makefile's VERSION_RE is the
# same expression.
# Usage: hack/release-tags.sh <git ref> <commit sha> [image repository]
set -euo pipefail
ref=${1:?git ref} sha=${2:?commit sha} img=${3:-ghcr.io/cozystack/metallb-iad}
num='(0|[1-9][0-9]*)'
ident='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
semver="^$num\.$num\.$num(-$ident(\.$ident)*)?\$"
case "$ref" in
refs/tags/v*)
  v=${ref#refs/tags/v}
  if ! [[ $v =~ $semver ]]; then
    echo "release-tags: tag ${ref#refs/tags/} is not vX.Y.Z (semver, no build metadata)" >&2
    exit 1
  fi
  tags="$img:$v"
  [[ -n ${BASH_REMATCH[4]} ]] || tags="$tags,$img:${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
  echo "version=$v"
  echo "tags=$tags"
  ;;
refs/heads/main)
  echo "version="
  echo "tags=$img:main,$img:main-${sha:0:7}"
  ;;
*)
  echo "release-tags: $ref publishes nothing (only main and vX.Y.Z tags do)" >&2
  exit 1
  ;;
esac
