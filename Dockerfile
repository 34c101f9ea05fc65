# One image holds the four controller binaries; each Deployment runs its own
# (command: ["/class"], ["/claim"], ["/service"] or ["/ipaddress"]).
#
# The build stage runs on the machine's own platform and cross-compiles for
# the target one (Go needs no emulator for that), so one buildx run on an
# amd64 runner builds linux/amd64 and linux/arm64 alike.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
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

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/ /
USER 65532:65532
