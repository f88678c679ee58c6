# nri-suite: build, test and run the NRI plugins.
# `make run` and `make test` are the two commands a newcomer needs; see README.md.

GO          ?= go
# Pinned runtime binaries and images are built once into this cache (see e2e/runtime/tools).
export NRI_SUITE_CACHE ?= /var/cache/nri-suite
FUZZTIME    ?= 10000x
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The binaries' --version and nri_suite_build_info come from the VCS stamp Go
# puts in them (common/version): on, whatever GOFLAGS says. A tree without
# git, or one git refuses to read, builds with BUILDVCS=false (version unknown).
BUILDVCS    ?= auto
GOBUILD      = $(GO) build -trimpath -buildvcs=$(BUILDVCS)

# Every plugins/<name> is a binary bin/nri-<name>; the test-only plugin comes along for e2e.
PLUGINS     := $(notdir $(patsubst %/main.go,%,$(wildcard plugins/*/main.go)))
BINARIES    := $(addprefix bin/nri-,$(PLUGINS)) bin/nri-e2e-test
# Not plugins: sidecar-order mounts its static helper into containers and finds it next to itself.
HELPERS     := bin/nri-sidecar-helper
RUNTIME_PKG := ./e2e/runtime/...
IS_ROOT     := $(shell [ "$$(id -u)" = 0 ] && echo yes)

.PHONY: all build test unit e2e fuzz-smoke runtime-bins run kubectl report bench lint fmt clean install uninstall chart chart-docs static images FORCE

all: build

build: $(BINARIES) $(HELPERS)

bin/nri-sidecar-helper: FORCE
	CGO_ENABLED=0 $(GOBUILD) -ldflags '-s -w' -o $@ ./plugins/sidecar-order/cmd/sidecar-helper

bin/nri-e2e-test: FORCE
	$(GOBUILD) -o $@ ./e2e/testplugin

bin/nri-%: FORCE
	$(GOBUILD) -o $@ ./plugins/$*

# Everything: lint, unit and harness tests with the race detector, the real-node
# tests on containerd and CRI-O, and a short run of every fuzz target. The
# unit tests run beside the real-node tests, and the checks that time
# nothing beside both at the lowest CPU priority (hack/test.sh says why).
test:
	MAKE="$(MAKE)" bash hack/test.sh

# The Helm chart's tests live in their own module (deployments/helm), so that
# Helm's dependencies stay out of the plugins': render, decode, security
# settings, deployments/kubernetes in sync. Without the race detector: they
# run no code of the suite's, and its build of Helm's and Kubernetes'
# packages would cost minutes on a cold cache for nothing. The dashboard's
# and alerts' test (deployments/monitoring) is a module of its own too, for
# Prometheus' PromQL parser and its dependencies.
chart:
	cd deployments/helm && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd deployments/monitoring && $(GO) vet ./... && $(GO) test -count=1 ./...

# The table of the chart's values in its README, from values.yaml's comments
# and values.schema.json (deployments/helm/cmd/chart-docs); make chart fails
# while it is out of date.
chart-docs:
	cd deployments/helm && $(GO) run ./cmd/chart-docs

# Unit and harness tests; the real-node tests (TestRealNode*, e2e/runtime)
# are e2e's: only e2e's tests take the host's sandbox lock.
unit:
	$(GO) test -race -count=1 -skip '^TestRealNode' $$($(GO) list ./... | grep -v '/e2e/runtime')

# The real-node tests need root; elsewhere they skip and say why (in CI they must run).
# One package at a time: sandboxes share the host, and a sandbox starting in one
# package would sweep what a test in another left on purpose to check the sweep.
e2e: runtime-bins
	$(GO) test -p 1 -count=1 -v -timeout 25m $(RUNTIME_PKG)
	@echo "e2e: the e2e/runtime packages done at $$(date -u +%T)"
	$(GO) test -count=1 -v -timeout 15m -run '^TestRealNode' ./plugins/...

runtime-bins:
ifeq ($(IS_ROOT)$(CI),)
	@echo "runtime-bins: not root: skipping the build of the pinned runtime binaries (the real-node tests will skip)"
else
	bash e2e/runtime/tools/install.sh all
endif

fuzz-smoke:
	FUZZTIME=$(FUZZTIME) bash hack/fuzz-smoke.sh

# A local one-node cluster (e2e/runtime/cmd/nri-sandbox): control plane,
# containerd and a kubelet, the suite installed with its Helm chart from
# `make images`, a demo workload applied through the API and a report of what
# each plugin did to it. It serves until Ctrl-C; meanwhile `make kubectl
# ARGS=...` (or bin/kubectl) and `make report POD=namespace/name` use it.
KUBECONFIG_LINK := _out/kubeconfig

# The local runtime runs the host's platform only.
run: IMAGE_PLATFORMS = $(HOST_PLATFORM)
run: images runtime-bins bin/nri-sandbox
	bin/nri-sandbox --images $(IMAGES_OUT) --workload e2e/runtime/testdata/demo \
		--kubeconfig-link $(KUBECONFIG_LINK) --kubectl-script bin/kubectl

kubectl:
	$(NRI_SUITE_CACHE)/bin/kubectl --kubeconfig $(KUBECONFIG_LINK) $(ARGS)

report: bin/nri-sandbox
	bin/nri-sandbox report --kubeconfig $(KUBECONFIG_LINK) --pod $(POD)

bin/nri-sandbox: FORCE
	$(GOBUILD) -o $@ ./e2e/runtime/cmd/nri-sandbox

# Pre-registered install for nodes that run the plugins without Kubernetes
# (docs/install.md): NN-name binaries into the runtime's plugin dir, their
# NN-name.conf into its conf.d, the sidecar helper under PREFIX.
PREFIX         ?= /usr/local
NRI_PLUGIN_DIR ?= /opt/nri/plugins
NRI_CONF_DIR   ?= /etc/nri/conf.d
INSTALL_ENV     = DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" NRI_PLUGIN_DIR="$(NRI_PLUGIN_DIR)" NRI_CONF_DIR="$(NRI_CONF_DIR)"

# The same static, stripped binaries as the images (make static): a node's
# runtime launches them whatever its C library.
install: static
	$(INSTALL_ENV) bash deployments/preregistered/install.sh $(STATIC_OUT)

uninstall:
	$(INSTALL_ENV) bash deployments/preregistered/install.sh --uninstall $(STATIC_OUT)

# One image per plugin for every platform of IMAGE_PLATFORMS, from static
# binaries and without a container engine (deployments/images), in
# IMAGES_OUT: nri-<plugin>/, an OCI image layout (crane push), and
# nri-<plugin>.tar, the same as an OCI archive (ctr images import, skopeo
# copy oci-archive:, podman load). Reproducible, tagged with the chart's
# appVersion, labelled with the binaries' revision and commit time.
IMAGE_REGISTRY  ?= ghcr.io/nri-suite
IMAGE_TAG       ?= $(shell sed -n 's/^appVersion: *"\(.*\)"/\1/p' deployments/helm/nri-suite/Chart.yaml)
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_SOURCE    ?= https://github.com/nri-suite/nri-suite
IMAGES_OUT      ?= _out/images
# The host's static binaries are STATIC_OUT's, which make install installs;
# another platform's go beside them, in bin-<os>-<arch>. Go cross-compiles
# them: no emulation.
HOST_PLATFORM   := linux/$(shell $(GO) env GOARCH)
STATIC_PLATFORM ?= $(HOST_PLATFORM)
STATIC_OUT      ?= $(IMAGES_OUT)/bin
static_dir       = $(if $(filter $(HOST_PLATFORM),$(1)),$(STATIC_OUT),$(IMAGES_OUT)/bin-$(subst /,-,$(1)))
STATIC_BUILD     = CGO_ENABLED=0 GOOS=$(word 1,$(subst /, ,$(STATIC_PLATFORM))) GOARCH=$(word 2,$(subst /, ,$(STATIC_PLATFORM))) \
	$(GOBUILD) -ldflags '-s -w -buildid='

# Static, stripped binaries of every plugin, the sidecar helper and the
# chart's copy tool for STATIC_PLATFORM, in STATIC_OUT: what the images
# hold and make install installs.
static:
	rm -rf $(STATIC_OUT) && mkdir -p $(STATIC_OUT)
	for p in $(PLUGINS); do $(STATIC_BUILD) -o $(STATIC_OUT)/nri-$$p ./plugins/$$p || exit 1; done
	$(STATIC_BUILD) -o $(STATIC_OUT)/nri-sidecar-helper ./plugins/sidecar-order/cmd/sidecar-helper
	$(STATIC_BUILD) -o $(STATIC_OUT)/nri-suite-copy ./deployments/cmd/nri-suite-copy

images:
	$(foreach p,$(IMAGE_PLATFORMS),$(MAKE) --no-print-directory static STATIC_PLATFORM=$(p) STATIC_OUT=$(call static_dir,$(p)) &&) true
	$(GO) run ./deployments/images --out $(IMAGES_OUT) --registry $(IMAGE_REGISTRY) --tag $(IMAGE_TAG) --source $(IMAGE_SOURCE) \
		$(foreach p,$(IMAGE_PLATFORMS),--platform $(p)=$(call static_dir,$(p)))

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
