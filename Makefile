# nri-suite: build, test and run the NRI plugins.
# `make run` and `make test` are the two commands a newcomer needs; see README.md.

GO          ?= go
# Pinned runtime binaries and images are built once into this cache (see e2e/runtime/tools).
export NRI_SUITE_CACHE ?= /var/cache/nri-suite
FUZZTIME    ?= 10000x
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Every plugins/<name> is a binary bin/nri-<name>; the test-only plugin comes along for e2e.
PLUGINS     := $(notdir $(patsubst %/main.go,%,$(wildcard plugins/*/main.go)))
BINARIES    := $(addprefix bin/nri-,$(PLUGINS)) bin/nri-e2e-test
# Not plugins: sidecar-order mounts its static helper into containers and finds it next to itself.
HELPERS     := bin/nri-sidecar-helper
RUNTIME_PKG := ./e2e/runtime/...
IS_ROOT     := $(shell [ "$$(id -u)" = 0 ] && echo yes)

.PHONY: all build test unit e2e fuzz-smoke runtime-bins run bench lint fmt clean FORCE

all: build

build: $(BINARIES) $(HELPERS)

bin/nri-sidecar-helper: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./plugins/sidecar-order/cmd/sidecar-helper

bin/nri-e2e-test: FORCE
	$(GO) build -trimpath -o $@ ./e2e/testplugin

bin/nri-%: FORCE
	$(GO) build -trimpath -o $@ ./plugins/$*

# Everything: lint, unit and harness tests with the race detector, the real-node
# tests on containerd and CRI-O, and a short run of every fuzz target.
test: lint unit e2e fuzz-smoke

# Unit and harness tests; the real-node tests (TestRealNode, e2e/runtime) are e2e's.
unit:
	$(GO) test -race -count=1 -skip '^TestRealNode$$' $$($(GO) list ./... | grep -v '/e2e/runtime')

# The real-node tests need root; elsewhere they skip and say why (in CI they must run).
# One package at a time: sandboxes share the host, and a sandbox starting in one
# package would sweep what a test in another left on purpose to check the sweep.
e2e: runtime-bins
	$(GO) test -p 1 -count=1 -v -timeout 25m $(RUNTIME_PKG)
	$(GO) test -count=1 -v -timeout 15m -run '^TestRealNode$$' ./plugins/...

runtime-bins:
ifeq ($(IS_ROOT)$(CI),)
	@echo "runtime-bins: not root: skipping the build of the pinned runtime binaries (the real-node tests will skip)"
else
	bash e2e/runtime/tools/install.sh all
endif

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) bash hack/fuzz-smoke.sh

# A local node sandbox: containerd + kubelet + every plugin, with a demo workload.
run: build runtime-bins
	$(GO) run ./e2e/runtime/cmd/nri-sandbox $(addprefix --plugin ,$(BINARIES)) --workload e2e/runtime/testdata/demo

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $$($(GO) list ./... | grep -v '/e2e/runtime')

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
