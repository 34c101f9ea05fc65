# metallb-iad: the MetalLB IP Allocation Driver.

CONTROLLERS := class claim service ipaddress
# Every version Dependabot cannot see is named once, in hack/versions.env
# (KEY=value lines); a value given to make or set in the environment wins.
versions := $(shell grep -E '^[A-Z0-9_]+=' hack/versions.env)
version = $(or $(patsubst $(1)=%,%,$(filter $(1)=%,$(versions))),$(error hack/versions.env names no $(1)))
CONTROLLER_GEN_VERSION ?= $(call version,CONTROLLER_GEN_VERSION)
# The MetalLB release the local control plane runs (hack/tools/metallb-<version>).
METALLB_VERSION ?= $(call version,METALLB_VERSION)
export METALLB_VERSION
HELM_VERSION ?= $(call version,HELM_VERSION)
export HELM_VERSION
# kind and actionlint for the kind e2e and the workflow lint.
KIND_VERSION ?= $(call version,KIND_VERSION)
ACTIONLINT_VERSION ?= $(call version,ACTIONLINT_VERSION)
IMAGE_REPO := ghcr.io/cozystack/metallb-iad
IMG ?= $(IMAGE_REPO):main
# VERSION is the release (x.y.z, no v) `make helm-package` stamps, checked
# as hack/release-tags.sh checks a tag (semver 2.0, no build metadata).
VERSION ?=
VERSION_RE := ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?$$
# IMAGE_DIGEST is the digest of the image the release pushed and signed
# (sha256:<64 hex>): `make helm-package` writes it into the packaged
# values.yaml as image.digest, so the packaged chart runs exactly that image.
IMAGE_DIGEST ?=
PACKAGE_DIR ?= $(BIN)
HELM := go run helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
GO_TEST_FLAGS ?=

export PATH := $(BIN):$(PATH)

.PHONY: all
all: build

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and one ClusterRole per controller (config/ and the chart).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@for c in $(CONTROLLERS); do \
		$(CONTROLLER_GEN) rbac:roleName=metallb-iad-$$c paths=./controllers/$$c/... output:rbac:artifacts:config=config/rbac/$$c || exit 1; \
		mkdir -p chart/metallb-iad/files/rbac; \
		cp config/rbac/$$c/role.yaml chart/metallb-iad/files/rbac/$$c.yaml; \
	done
	@mkdir -p chart/metallb-iad/files/crds && cp config/crd/bases/*.yaml chart/metallb-iad/files/crds/

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: fmt
fmt:
	go fmt ./...

.PHONY: vet
vet:
	go vet -tags integration ./...

.PHONY: verify-generated
verify-generated: manifests generate ## Fail when generated files differ from what is committed.
	@git diff --exit-code --stat -- api config chart || { echo "generated files are stale: run 'make manifests generate' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- api config chart)" || { git status --porcelain -- api config chart; echo "untracked generated files: run 'make manifests generate' and commit" >&2; exit 1; }

.PHONY: tools
tools: ## Build etcd, kube-apiserver, kube-controller-manager and the MetalLB controller (METALLB_VERSION) into bin/k8s (cached; KUBEBUILDER_ASSETS with kube-apiserver and etcd skips building those).
	bash hack/build-tools.sh

##@ Test

.PHONY: test
test: tools gateway-tools $(CONTROLLER_GEN) vet ## Unit and integration tests on a real local control plane with the real MetalLB controller (the short soak with seed 1 unless SOAK_SEED says otherwise).
	SOAK_SEED=$(or $(SOAK_SEED),1) go test -tags integration $(GO_TEST_FLAGS) -count=1 -timeout 30m ./...

.PHONY: test-unit
test-unit: ## The pure tests of every package with any: no control plane starts (the *_integration_test.go files build only with -tags integration; -short skips the checks that build helm and actionlint).
	go test -short -count=1 ./api/... ./internal/... ./controllers/... ./test/manifests/... ./test/core/... ./test/cluster/... ./test/chart/... ./test/soak/... ./test/layout/...

.PHONY: test-e2e
test-e2e: tools gateway-tools ## The full local e2e suite: restart and failover features repeated 5 times.
	E2E_REPEAT=5 go test -count=1 -v -timeout 60m ./test/e2e/

.PHONY: gateway-tools
gateway-tools: ## Build Envoy Gateway's controller (hack/tools/envoy-gateway) and render its CRDs into bin/k8s, for the e2e feature `gateway` (cached like tools).
	bash hack/build-tools.sh gateway

.PHONY: node-tools
node-tools: ## Build kubelet, kube-proxy and kube-scheduler into bin/node (cached like tools).
	bash hack/build-node-tools.sh

.PHONY: test-node
test-node: tools gateway-tools node-tools ## The e2e suite on a one-node cluster on this machine, the chart's pods for real (root; installs containerd from Debian).
	E2E_PROVIDER=node go test -p 1 -count=1 -v -timeout 45m ./test/node/ ./test/e2e/

.PHONY: test-kind
test-kind: e2e-tools ## The e2e suite on a dual-stack kind cluster (needs Docker and the images: E2E_IMAGE, and E2E_CORE_IMAGE built from E2E_CORE_SRC).
	E2E_PROVIDER=kind go test -count=1 -v -timeout 60m ./test/e2e/

.PHONY: soak
soak: tools ## The long chaos soak (SOAK_OPS, SOAK_KILLS, SOAK_API_RESTARTS, SOAK_SEED, SOAK_DURATION, SOAK_CONVERGE override).
	SOAK_LONG=1 go test -count=1 -v -run '^TestSoak$$' -timeout 120m ./test/soak/

.PHONY: soak-short
soak-short: tools ## The short chaos soak alone (250 operations, 6 kills, 1 API server restart; also part of make test).
	go test -count=1 -v -run '^TestSoak$$' -timeout 30m ./test/soak/

.PHONY: bench
bench: tools ## Benchmarks on the local control plane, and the work queue's shut-down; they print figures and ratios.
	go test -v -run '^$$' -bench . -benchtime 1x -timeout 90m ./test/bench/

##@ Run

.PHONY: build
build: ## Build the four controller binaries into bin/ (static, as the image does).
	@for c in $(CONTROLLERS); do CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o $(BIN)/$$c ./cmd/$$c || exit 1; done

.PHONY: demo
demo: tools build ## Start a local control plane with MetalLB, the reference core and the four controllers, and show the story.
	@go build -o $(BIN)/demo ./test/demo
	$(BIN)/demo $(DEMO_ARGS)

##@ Release

.PHONY: docker-build
docker-build: ## Build the image (needs a container engine).
	docker build -t $(IMG) .

.PHONY: helm-lint
helm-lint: ## Lint the chart strictly.
	$(HELM) lint --strict chart/metallb-iad

.PHONY: helm-package
helm-package: ## Package the chart into PACKAGE_DIR (bin/) as release VERSION=x.y.z: chart version and appVersion (the default image tag) both x.y.z; IMAGE_DIGEST=sha256:... pins the packaged chart's image by digest, as the release workflow does.
	@echo "$(VERSION)" | grep -Eq '$(VERSION_RE)' || { echo "helm-package: set VERSION=x.y.z (the release, without the v; got '$(VERSION)')" >&2; exit 1; }
	@echo "$(IMAGE_DIGEST)" | grep -Eq '^(sha256:[0-9a-f]{64})?$$' || { echo "helm-package: IMAGE_DIGEST is sha256:<64 lowercase hex> (got '$(IMAGE_DIGEST)')" >&2; exit 1; }
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	cp -R chart/metallb-iad "$$tmp/metallb-iad"; \
	if [ -n "$(IMAGE_DIGEST)" ]; then \
		values="$$tmp/metallb-iad/values.yaml"; \
		sed '/^image:/,/^[^ #]/ s|^  digest: .*|  digest: "$(IMAGE_DIGEST)"|' chart/metallb-iad/values.yaml > "$$values"; \
		test "$$(grep -c '^  digest: "$(IMAGE_DIGEST)"$$' "$$values")" = 1 || { echo "helm-package: image.digest not found in values.yaml: the digest was not stamped" >&2; exit 1; }; \
	fi; \
	$(HELM) package "$$tmp/metallb-iad" -d $(PACKAGE_DIR) --version $(VERSION) --app-version $(VERSION)
	@test -z "$(IMAGE_DIGEST)" || $(HELM) template metallb-iad $(PACKAGE_DIR)/metallb-iad-$(VERSION).tgz | grep '^ *image: "[^"]*@$(IMAGE_DIGEST)"$$' >/dev/null || { echo "helm-package: the packaged chart does not run the image @$(IMAGE_DIGEST)" >&2; exit 1; }

.PHONY: e2e-tools
e2e-tools: $(BIN)/kind $(BIN)/helm ## Install kind and helm (KIND_VERSION, HELM_VERSION) into bin/ for the kind e2e and releases.

$(BIN)/kind:
	GOBIN=$(BIN) go install sigs.k8s.io/kind@$(KIND_VERSION)

$(BIN)/helm:
	GOBIN=$(BIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

.PHONY: lint-workflows
lint-workflows: ## Lint .github/workflows with actionlint (ACTIONLINT_VERSION).
	go run github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION) -no-color

$(CONTROLLER_GEN):
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
