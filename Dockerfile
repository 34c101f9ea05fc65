# One image holds the four controller binaries; each Deployment runs its own
# (command: ["/class"], ["/claim"], ["/service"] or ["/ipaddress"]).
#
# The build stage runs on the machine's own platform and cross-compiles for
# the target one (Go needs no emulator for that), so one buildx run on an
# amd64 runner builds linux/amd64 and linux/arm64 alike.
#
# Base images are pinned by digest (the tag says which line); Dependabot
# (.github/dependabot.yml) proposes each new digest.
FROM --platform=$BUILDPLATFORM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
# The Go that builds the image is exactly go.mod's toolchain line, as in CI
# (TestDockerfileGoIsGoMod keeps the two equal), whichever 1.26 patch
# release the base image holds: the go command fetches that toolchain from
# the Go module proxy when its own differs.
ARG GO_VERSION=1.26.8
ENV GOTOOLCHAIN=go${GO_VERSION}
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
ARG TARGETOS=linux
ARG TARGETARCH
RUN for c in class claim service ipaddress; do \
      CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/$c ./cmd/$c || exit 1; \
    done

FROM gcr.io/distroless/static:nonroot@sha256:e2e927ec666bae08560abb3c55d0659eceabb657f56b6782ab500a9fc7f555e3
# VERSION and REVISION come from the release workflow (the release or the
# branch, and the commit).
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="metallb-iad" \
      org.opencontainers.image.description="The MetalLB IP Allocation Driver: IP addresses tenants own, with MetalLB as the allocator of record" \
      org.opencontainers.image.source="https://github.com/cozystack/metallb-iad" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/ /
USER 65532:65532
