# kubectl-traceflow: every workflow goes through this file. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VERSION ?= $(shell hack/version.sh)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Expensive artifacts (Kubernetes binaries, tools) live outside the checkout, keyed by version.
CACHE_DIR ?= /var/cache/kubectl-traceflow
GOLANGCI_VERSION := v2.15.0
GOLANGCI := $(CACHE_DIR)/tools/golangci-lint-$(GOLANGCI_VERSION)/golangci-lint
ACTIONLINT_VERSION := v1.7.12
ACTIONLINT := $(CACHE_DIR)/tools/actionlint-$(ACTIONLINT_VERSION)/actionlint
GO_LDFLAGS := -s -w -X github.com/kubectl-traceflow/kubectl-traceflow/internal/version.Version=$(VERSION) -X github.com/kubectl-traceflow/kubectl-traceflow/internal/version.Commit=$(COMMIT)
GO_BUILD := CGO_ENABLED=0 go build -trimpath -ldflags '$(GO_LDFLAGS)'
# Each suite's summary holds every package to its floor of top-level tests,
# kept in hack/testsummary/floors (one file per suite label); a floor moves
# only with a commit that says why: `make test-unit UPDATE_FLOORS=1` writes
# today's counts.
TESTSUMMARY := go run ./hack/testsummary -floors-dir hack/testsummary/floors $(if $(UPDATE_FLOORS),-update-floors)
# The unit and integration suites run under the race detector, which needs
# cgo and a C compiler (make deps installs gcc); CGO_ENABLED=1 makes a
# missing compiler an error rather than a silent cgo-less build.
GO_TEST_RACE := CGO_ENABLED=1 go test -race

export CACHE_DIR

.PHONY: help
help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/kubectl-traceflow and bin/traceflow-helper
	$(GO_BUILD) -o bin/kubectl-traceflow ./cmd/kubectl-traceflow
	$(GO_BUILD) -o bin/traceflow-helper ./cmd/traceflow-helper

.PHONY: fmt
fmt: ## format the Go code
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet every package, build tags included; the plugin also as the release builds it for darwin and windows
	go vet -tags integration,e2e ./...
	GOOS=darwin go vet ./cmd/kubectl-traceflow/ ./pkg/plugin/...
	GOOS=windows go vet ./cmd/kubectl-traceflow/ ./pkg/plugin/...

$(GOLANGCI):
	GOBIN=$(dir $(GOLANGCI)) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

$(ACTIONLINT):
	GOBIN=$(dir $(ACTIONLINT)) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

.PHONY: lint
lint: $(GOLANGCI) $(ACTIONLINT) vet ## golangci-lint (v2, config in .golangci.yml), go vet, actionlint on .github/workflows
	$(GOLANGCI) run --build-tags integration,e2e ./...
	$(ACTIONLINT) -shellcheck= .github/workflows/*.yml

.PHONY: deps
deps: ## install the Debian packages the unit, integration and e2e tests need (root; skips what is present)
	hack/install-deps.sh

.PHONY: test-unit
test-unit: ## unit tests under the race detector: no root, no cluster (make deps provides kubectl, ovs-ofctl, xmllint, gcc); a skip fails
	TRACEFLOW_CI=1 $(GO_TEST_RACE) -json -count=1 ./... | $(TESTSUMMARY) -label unit -forbid-skips

# Each fuzz target's budget in `make fuzz`; hack/fuzz.sh finds every target.
FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## every Go fuzz target, FUZZTIME (30s) each, one go test -fuzz per target; a crash fails and is kept in testdata/fuzz (about 18 min for 28 targets)
	hack/fuzz.sh $(FUZZTIME)

.PHONY: fuzz-ci
fuzz-ci: ## every Go fuzz target for 3s each, as make test runs it (4 to 9 min here)
	hack/fuzz.sh 3s

.PHONY: test-integration
test-integration: ## under the race detector: node helper against a real Open vSwitch in network namespaces, the lab's OVN controller against real OVN databases (root)
	TRACEFLOW_CI=1 $(GO_TEST_RACE) -json -count=1 -tags integration -run Integration -timeout 20m ./pkg/... ./cmd/... ./test/lab/... | $(TESTSUMMARY) -label "integration (OVS, OVN)" -forbid-skips

# The lab modes (TFLAB_CNI) the e2e suite runs in, one after the other: every
# mode the lab has, one file each, test/lab/modes/NN-MODE.sh, in the order of
# NN. Each test declares the modes it holds in (test/e2e/modes_test.go).
E2E_MODES ?= $(shell cd test/lab/modes && ls -- *.sh | sed -e 's/^[0-9]*-//' -e 's/\.sh$$//')

.PHONY: test-e2e
# The mode whose e2e run drives a plugin built with the race detector: once
# per make test, the plugin's goroutines meet a real API server, real helpers
# and interrupts (a race report makes the plugin exit 66, which no test
# accepts). The helper runs in its image, a static build, in every mode.
E2E_RACE_MODE ?= lab

.PHONY: build-plugin-race
build-plugin-race: ## bin/kubectl-traceflow built with the race detector (cgo; make deps installs gcc)
	CGO_ENABLED=1 go build -race -trimpath -ldflags '$(GO_LDFLAGS)' -o bin/kubectl-traceflow ./cmd/kubectl-traceflow

test-e2e: build ## end to end in the lab, once per mode in E2E_MODES: brings it up (or reuses it), runs the built binaries through kubectl (the plugin under the race detector in E2E_RACE_MODE)
	@rc=0; recap=$$(mktemp); trap 'rm -f "$$recap"' EXIT; for mode in $(E2E_MODES); do \
	  if [ "$$mode" = "$(E2E_RACE_MODE)" ]; then $(MAKE) --no-print-directory build-plugin-race; else $(MAKE) --no-print-directory build; fi; \
	  TFLAB_CNI=$$mode RECAP=$$recap hack/timed.sh "e2e ($$mode)" bash -o pipefail -c \
	    'TRACEFLOW_CI=1 go test -json -count=1 -tags e2e -timeout 60m ./test/e2e/... | $(TESTSUMMARY) -label "e2e ($$TFLAB_CNI)" -forbid-skips -recap "$$RECAP"' || { rc=1; test/lab/lab.sh errors $$mode || true; }; \
	done; \
	if [ $$rc -ne 0 ]; then echo "==== e2e recap, every mode (the failures above, by mode):"; cat "$$recap"; fi; exit $$rc

.PHONY: bench-e2e
bench-e2e: build ## time to verdict in the lab (helper mode, median of 10) next to the pod-start floor, and a 27-trace check suite (median of 3) with shared helpers and with helper pods per trace, and a 420-cell matrix
	TRACEFLOW_KEEP_LAB=$${TRACEFLOW_KEEP_LAB:-1} go test -tags e2e -run '^$$' -bench TimeToVerdict -benchtime 10x -timeout 30m ./test/e2e

.PHONY: compare-engines
compare-engines: build ## the lab's Antrea mode: each case traced by Antrea's agents and by the helper, hop lists side by side, with real traffic (a report, not a test)
	TFLAB_CNI=antrea TRACEFLOW_KEEP_LAB=$${TRACEFLOW_KEEP_LAB:-1} go test -tags e2e -run '^$$' -bench CompareEngines -benchtime 1x -timeout 30m ./test/e2e

.PHONY: compare-ovn
compare-ovn: build ## the lab's ovnk mode (the genuine OVN-Kubernetes): each case traced by the helper and simulated by ovn-trace on each node, logical flows side by side, with real traffic (a report, not a test)
	TFLAB_CNI=ovnk TRACEFLOW_KEEP_LAB=$${TRACEFLOW_KEEP_LAB:-1} go test -tags e2e -run '^$$' -bench CompareOVN -benchtime 1x -timeout 30m ./test/e2e

.PHONY: test
test: ## everything CI runs: lint, unit, fuzz (3s a target), integration (OVS), e2e (every lab mode), release and krew checks, each timed
	@hack/timed.sh "deps" $(MAKE) --no-print-directory deps
	@hack/prebuild.sh start $$PPID
	@hack/timed.sh "lint" $(MAKE) --no-print-directory lint
	@hack/timed.sh "unit" $(MAKE) --no-print-directory test-unit
	@hack/timed.sh "integration (OVS, OVN)" $(MAKE) --no-print-directory test-integration
	@hack/timed.sh "Kubernetes build (cached after the first)" test/lab/build-k8s.sh
	@hack/timed.sh "e2e, every mode" $(MAKE) --no-print-directory test-e2e
	@hack/timed.sh "cold builds (OVS/OVN root, Antrea, OVN-Kubernetes, fuzz binaries; in the background since lint)" hack/prebuild.sh wait
	@hack/timed.sh "fuzz (every target, 3s each)" $(MAKE) --no-print-directory fuzz-ci
	@hack/timed.sh "release and krew" $(MAKE) --no-print-directory krew

.PHONY: lab-up
lab-up: build ## start the two-node lab cluster (idempotent; TFLAB_CNI=lab|ovn|antrea picks the dataplane); prints the KUBECONFIG export
	test/lab/lab.sh up

.PHONY: lab-down
lab-down: ## stop the lab and remove everything it created
	test/lab/lab.sh down

.PHONY: lab-status
lab-status: ## show what of the lab is running, and which CNI
	test/lab/lab.sh status

.PHONY: demo
demo: build lab-up ## the mission: trace pod-a -> pod-b TCP 80 across two real nodes in the lab
	test/lab/demo.sh

KREW_VERSION := v0.4.3
KREW_TOOLS := $(CACHE_DIR)/tools/krew-$(KREW_VERSION)
# The plugin's own default helper image; `make image` builds it.
HELPER_IMAGE ?= ghcr.io/kubectl-traceflow/traceflow-helper:$(VERSION)

.PHONY: image
image: build ## the helper image as an OCI archive, without Docker (images/helper/Dockerfile builds the same with Docker)
	mkdir -p dist
	go run ./test/lab/cmd/lab-image -ref $(HELPER_IMAGE) -o dist/traceflow-helper-$(VERSION).oci.tar \
		-entrypoint /traceflow-helper bin/traceflow-helper=/traceflow-helper
	@echo "dist/traceflow-helper-$(VERSION).oci.tar: $(HELPER_IMAGE) (load with: ctr -n k8s.io image import FILE)"

.PHONY: release
release: ## archives for linux, darwin (amd64, arm64) and windows/amd64 with sha256 sums, in dist/ (HELPER_IMAGE_REF=IMAGE@sha256:... stamps the default helper image)
	RELEASE_VERSION=$(VERSION) COMMIT=$(COMMIT) HELPER_IMAGE_REF=$(HELPER_IMAGE_REF) hack/release.sh
	RELEASE_VERSION=$(VERSION) hack/release-check.sh

$(KREW_TOOLS)/krew $(KREW_TOOLS)/validate-krew-manifest:
	GOBIN=$(KREW_TOOLS) go install sigs.k8s.io/krew/cmd/krew@$(KREW_VERSION) sigs.k8s.io/krew/cmd/validate-krew-manifest@$(KREW_VERSION)

.PHONY: krew
krew: release $(KREW_TOOLS)/krew $(KREW_TOOLS)/validate-krew-manifest ## render the krew manifest, validate it, install the plugin with krew into a temporary KREW_ROOT
	RELEASE_VERSION=$(VERSION) hack/krew-render.sh
	$(KREW_TOOLS)/validate-krew-manifest -manifest dist/traceflow.yaml -skip-install
	KREW=$(KREW_TOOLS)/krew RELEASE_VERSION=$(VERSION) hack/krew-install-check.sh

.PHONY: clean
clean: ## remove build outputs (not the cache in $(CACHE_DIR))
	rm -rf bin dist

.PHONY: bench-helper
bench-helper: ## benchmark the node helper against real OVS (root): start-to-ready and injection-to-verdict, one node and two
	TRACEFLOW_CI=1 go test -tags integration -run '^$$' -bench BenchmarkIntegration -benchtime 30x ./cmd/traceflow-helper/
