# One image holds the four controller binaries; each Deployment runs its own
# (command: ["/class"], ["/claim"], ["/service"] or ["/ipaddress"]).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN for c in class claim service ipaddress; do \
      CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w" -o /out/$c ./cmd/$c || exit 1; \
    done

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/ /
USER 65532:65532
