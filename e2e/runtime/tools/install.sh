#!/usr/bin/env bash
# install.sh builds the pinned runtime binaries and the local images that the
# real-node e2e tests of nri-suite run, into a cache outside the repository.
#
#   e2e/runtime/tools/install.sh [all|containerd|runc|crictl|kube|cni|helm|metrics-server|crio|crane|images]...
#
# Layout (CACHE is $NRI_SUITE_CACHE, default /var/cache/nri-suite):
#   CACHE/<part>-<version>/        the binaries of one part at one version; valid
#                                  only once it holds the marker file .complete
#   CACHE/bin/                     symlinks with plain names to the current versions:
#                                  containerd containerd-shim-runc-v2 ctr runc crictl
#                                  kubelet kube-proxy etcd kube-apiserver
#                                  kube-controller-manager kube-scheduler kubectl
#                                  (one multi-call binary, kube/; its directory is
#                                  kube-<version>-<hash of kube/>)
#                                  bridge host-local loopback portmap (CNI) helm
#                                  metrics-server
#                                  crio pinns crane (conmon -> /usr/bin/conmon)
#   CACHE/images/busybox.tar       OCI image archives, named by their index annotations
#   CACHE/images/pause.tar         localhost/nri-suite/{busybox,pause}:latest
#
# Versions come from versions.env beside this script; the Debian packages the
# builds need are listed in apt-packages.txt (this script never calls apt).
# Everything is built from the Go module proxy with the machine's Go. A part
# whose directory is complete is skipped, so running it again is cheap.
set -euo pipefail
umask 022

TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$TOOLS_DIR/../../.." && pwd)
CACHE=${NRI_SUITE_CACHE:-/var/cache/nri-suite}
MARKER=.complete
PARTS=(containerd runc crictl kube cni helm metrics-server crio crane images)

# shellcheck disable=SC1091 # versions.env sits beside this script
source "$TOOLS_DIR/versions.env"

# Reproducible, self-contained Go builds: no VCS stamping, no local paths in
# the binaries, no go.work from a parent directory.
export GOFLAGS="-buildvcs=false -trimpath"
export GOWORK=off

log() { printf '%s install.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	local IFS='|'
	echo "usage: $0 [all|${PARTS[*]}]..." >&2
	echo "       builds into \$NRI_SUITE_CACHE (now $CACHE)" >&2
	exit 2
}

# require_apt fails naming every listed Debian package that is not installed.
require_apt() {
	local part=$1 pkg missing=()
	shift
	command -v dpkg-query >/dev/null || die "$part needs the Debian packages $*; dpkg-query is missing, so they cannot be checked"
	for pkg in "$@"; do
		[[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) == installed ]] || missing+=("$pkg")
	done
	((${#missing[@]} == 0)) ||
		die "$part needs the Debian package(s) ${missing[*]}: apt-get install ${missing[*]} (all of them are listed in $TOOLS_DIR/apt-packages.txt)"
}

require_go() {
	command -v go >/dev/null || die "go is not in PATH: the builds need the Go toolchain (go.mod says $(sed -n 's/^go //p' "$REPO_ROOT/go.mod"))"
}

# module_time prints the publication time of a module version, used as the
# build date so that rebuilding gives the same binary.
module_time() {
	go list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' "$1"
}

# link_bin points CACHE/bin/<name> at a file, relative inside the cache.
link_bin() {
	local name=$1 target=$2
	mkdir -p "$CACHE/bin"
	ln -sfn "$target" "$CACHE/bin/$name.tmp"
	mv -T "$CACHE/bin/$name.tmp" "$CACHE/bin/$name"
}

# build_part NAME VERSION BUILDER BINARIES... builds a part into
# CACHE/NAME-VERSION unless it is complete there, then links its binaries
# into CACHE/bin. BUILDER is called with an empty directory to fill; the part
# directory only appears, with its marker, once the builder has succeeded.
build_part() {
	local name=$1 version=$2 builder=$3
	shift 3
	local dir="$CACHE/$name-$version" bin
	if [[ -f $dir/$MARKER ]]; then
		log "$name $version: cached in $dir"
	else
		log "$name $version: building into $dir"
		local start=$SECONDS tmp
		tmp=$(mktemp -d "$CACHE/.build-$name-$version.XXXXXX")
		CLEANUP+=("$tmp")
		chmod 0755 "$tmp"
		# From the empty build directory, so that no go.mod around the
		# caller's working directory takes part in the build.
		(cd "$tmp" && "$builder" "$tmp" "$version")
		for bin in "$@"; do
			[[ -x $tmp/$bin ]] || die "$name $version: the build did not produce $bin"
		done
		printf 'built %s %s with %s on %s in %ss\n' "$name" "$version" "$(go env GOVERSION)" \
			"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$((SECONDS - start))" >"$tmp/$MARKER"
		rm -rf "$dir"
		mv -T "$tmp" "$dir"
		log "$name $version: built in $((SECONDS - start))s"
	fi
	for bin in "$@"; do
		link_bin "$bin" "../$name-$version/$bin"
	done
}

# --- builders: each fills the directory $1 for version $2 ---

build_containerd() {
	local out=$1 version=$2 pkg=github.com/containerd/containerd/v2
	GOBIN=$out go install -ldflags "-s -w -X $pkg/version.Version=$version" \
		"$pkg/cmd/containerd@$version" "$pkg/cmd/containerd-shim-runc-v2@$version" "$pkg/cmd/ctr@$version"
}

build_runc() {
	local out=$1 version=$2
	# runc embeds its version; seccomp needs cgo and libseccomp.
	CGO_ENABLED=1 GOBIN=$out go install -tags seccomp -ldflags "-s -w" \
		"github.com/opencontainers/runc@$version"
}

build_crictl() {
	local out=$1 version=$2 mod=sigs.k8s.io/cri-tools
	GOBIN=$out go install -ldflags "-s -w -X $mod/pkg/version.Version=${version#v}" \
		"$mod/cmd/crictl@$version"
}

build_crane() {
	local out=$1 version=$2 mod=github.com/google/go-containerregistry
	GOBIN=$out go install -ldflags "-s -w -X $mod/cmd/crane/cmd.Version=$version" \
		"$mod/cmd/crane@$version"
}

# KUBE_COMMANDS are the names the multi-call binary of kube/ answers to.
KUBE_COMMANDS=(kubelet kube-proxy etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

# kube_key is the kube part's cache key: the Kubernetes version and a hash
# of the module that builds it, so that a changed set of commands builds
# anew where the cache holds the previous binary.
kube_key() {
	local hash
	hash=$(cat "$TOOLS_DIR/kube/go.mod" "$TOOLS_DIR/kube/go.sum" "$TOOLS_DIR/kube/main.go" | sha256sum)
	echo "$KUBERNETES_VERSION-${hash:0:12}"
}

build_kube() {
	local out=$1 version=${2%-*} module_dir=$TOOLS_DIR/kube key ldflags=("-s" "-w") cmd
	local pinned built
	pinned=$(cd "$module_dir" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
	[[ $pinned == "$version" ]] ||
		die "kube: $module_dir/go.mod requires k8s.io/kubernetes $pinned but versions.env says KUBERNETES_VERSION=$version"
	local major=${version#v} minor
	minor=${major#*.}
	minor=${minor%%.*}
	major=${major%%.*}
	built=$(cd "$module_dir" && module_time "k8s.io/kubernetes@$version")
	# What kubernetes' hack/lib/version.sh stamps from git.
	for key in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=("-X $key.gitVersion=$version" "-X $key.gitMajor=$major" "-X $key.gitMinor=$minor"
			"-X $key.gitTreeState=clean" "-X $key.buildDate=$built")
	done
	# -mod=readonly: the committed go.mod and go.sum must be enough; the
	# build never rewrites them.
	(cd "$module_dir" && GOFLAGS="$GOFLAGS -mod=readonly" go build -ldflags "${ldflags[*]}" -o "$out/kube" .)
	for cmd in "${KUBE_COMMANDS[@]}"; do
		ln -s kube "$out/$cmd"
	done
}

build_cni() {
	local out=$1 version=$2 mod=github.com/containernetworking/plugins plugin pkgs=()
	for plugin in main/bridge ipam/host-local main/loopback meta/portmap; do
		pkgs+=("$mod/plugins/$plugin@$version")
	done
	CGO_ENABLED=0 GOBIN=$out go install -ldflags "-s -w -X $mod/pkg/utils/buildversion.BuildVersion=$version" "${pkgs[@]}"
}

build_helm() {
	local out=$1 version=$2 mod=helm.sh/helm/v3
	CGO_ENABLED=0 GOBIN=$out go install -ldflags "-s -w -X $mod/internal/version.version=$version" "$mod/cmd/helm@$version"
}

build_metrics_server() {
	local out=$1 version=$2 mod=sigs.k8s.io/metrics-server
	# The stamps its Makefile sets (client-go's version package), from the
	# module's publication time instead of git.
	local pkg=k8s.io/client-go/pkg/version
	CGO_ENABLED=0 GOBIN=$out go install -ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitTreeState=clean \
		-X $pkg.buildDate=$(module_time "$mod@$version")" "$mod/cmd/metrics-server@$version"
}

build_crio() {
	local out=$1 version=$2 mod=github.com/cri-o/cri-o src
	# The proxy refuses to list CRI-O's versions, so go install cannot build
	# it; build its module source instead, in a writable copy because the
	# module cache is read-only and -mod=mod may complete its go.sum.
	src=$(go mod download -json "$mod@$version" | jq -r .Dir)
	[[ -d $src ]] || die "crio: go mod download $mod@$version gave no directory"
	cp -r "$src" "$out/src"
	chmod -R u+w "$out/src"
	(cd "$out/src" && CGO_ENABLED=1 GOFLAGS="$GOFLAGS -mod=mod" go build \
		-tags "seccomp containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper" \
		-ldflags "-s -w -X $mod/internal/version.buildDate=$(module_time "$mod@$version")" \
		-o "$out/crio" ./cmd/crio)
	# pinns is C; the flags are those of its own Makefile, stripped by -s.
	gcc -std=c99 -Os -Wall -Werror -Wextra -static -s -o "$out/pinns" "$out/src"/pinns/src/*.c
	rm -rf "$out/src"
}

# --- images ---

# Every image file and layer entry gets this mtime, so that the archives are
# byte-for-byte the same whenever the inputs are.
IMAGE_EPOCH=0
IMAGE_CREATED=1970-01-01T00:00:00Z
IMAGE_PREFIX=localhost/nri-suite

# reproducible_tar DIR OUT archives the content of DIR (sorted, root-owned,
# fixed mtimes, no ./ prefix) into OUT.
reproducible_tar() {
	(cd "$1" && find . -mindepth 1 -printf '%P\0' | LC_ALL=C sort -z |
		tar --null --no-recursion -T - --format=gnu --numeric-owner --owner=0 --group=0 \
			--mtime="@$IMAGE_EPOCH" -cf "$2")
}

# add_blob LAYOUT FILE moves FILE into the layout's blobs and prints
# "<digest> <size>".
add_blob() {
	local layout=$1 file=$2 sum size
	sum=$(sha256sum "$file" | cut -d' ' -f1)
	size=$(stat -c %s "$file")
	mkdir -p "$layout/blobs/sha256"
	mv "$file" "$layout/blobs/sha256/$sum"
	echo "sha256:$sum $size"
}

# oci_image ROOTFS NAME CONFIG_JSON OUT writes a single-layer OCI image of
# ROOTFS named $IMAGE_PREFIX/NAME:latest to the archive OUT. CONFIG_JSON is
# the image's "config" object (Entrypoint, Cmd, Env ...). The archive is an
# OCI layout (index.json annotated with the name for ctr import) that also
# carries a docker-style manifest.json, so that crane push accepts it too.
oci_image() {
	local rootfs=$1 name=$2 config=$3 out=$4 work ref arch
	local layer_digest layer_size cfg_digest cfg_size mfst_digest mfst_size
	ref=$IMAGE_PREFIX/$name:latest
	arch=$(go env GOARCH)
	work=$(mktemp -d "$CACHE/.build-image-$name.XXXXXX")
	CLEANUP+=("$work")
	mkdir -p "$work/layout"

	reproducible_tar "$rootfs" "$work/layer.tar"
	read -r layer_digest layer_size < <(add_blob "$work/layout" "$work/layer.tar")

	jq -cnS --arg arch "$arch" --arg created "$IMAGE_CREATED" --arg diff "$layer_digest" \
		--argjson config "$config" --arg by "nri-suite e2e/runtime/tools/install.sh" '{
			architecture: $arch, os: "linux", created: $created, config: $config,
			rootfs: {type: "layers", diff_ids: [$diff]},
			history: [{created: $created, created_by: $by}]
		}' | tr -d '\n' >"$work/config.json"
	read -r cfg_digest cfg_size < <(add_blob "$work/layout" "$work/config.json")

	jq -cnS --arg cd "$cfg_digest" --argjson cs "$cfg_size" --arg ld "$layer_digest" --argjson ls "$layer_size" '{
			schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
			config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
			layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $ld, size: $ls}]
		}' | tr -d '\n' >"$work/manifest"
	read -r mfst_digest mfst_size < <(add_blob "$work/layout" "$work/manifest")

	jq -cnS --arg md "$mfst_digest" --argjson ms "$mfst_size" --arg ref "$ref" '{
			schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
			manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms,
				annotations: {"io.containerd.image.name": $ref, "org.opencontainers.image.ref.name": "latest"}}]
		}' >"$work/layout/index.json"
	jq -cn --arg c "blobs/sha256/${cfg_digest#sha256:}" --arg l "blobs/sha256/${layer_digest#sha256:}" \
		--arg ref "$ref" '[{Config: $c, RepoTags: [$ref], Layers: [$l]}]' >"$work/layout/manifest.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"
	find "$work/layout" -type d -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +

	reproducible_tar "$work/layout" "$out"
	log "images: $ref -> $out (manifest $mfst_digest)"
}

# busybox_rootfs DIR lays out Debian's static busybox with a symlink for
# each of its applets at the path busybox itself reports.
busybox_rootfs() {
	local root=$1 applet
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,var,proc,sys,dev,run}
	mkdir -m 1777 "$root/tmp"
	install -m 0755 /bin/busybox "$root/bin/busybox"
	while read -r applet; do
		[[ $applet == bin/busybox ]] && continue
		mkdir -p "$root/$(dirname "$applet")"
		ln -s /bin/busybox "$root/$applet"
	done < <(/bin/busybox --list-full)
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	chmod 0644 "$root/etc/passwd" "$root/etc/group"
}

build_images() {
	local dir=$CACHE/images key work
	# The images are rebuilt when any of their inputs changes.
	key=$( {
		dpkg-query -W -f='busybox-static ${Version}\n' busybox-static
		go env GOVERSION GOARCH
		sha256sum "$TOOLS_DIR/install.sh" "$TOOLS_DIR/pause/main.go" | cut -d' ' -f1
	} | sha256sum | cut -d' ' -f1)
	if [[ -f $dir/$MARKER && $(<"$dir/$MARKER") == "$key" ]]; then
		log "images: cached in $dir"
		return
	fi
	log "images: building into $dir"
	local start=$SECONDS
	work=$(mktemp -d "$CACHE/.build-images.XXXXXX")
	CLEANUP+=("$work")

	busybox_rootfs "$work/busybox"
	[[ -x $work/busybox/bin/sh && -L $work/busybox/usr/bin/env ]] || die "images: busybox --list-full gave no sh or env applet"
	oci_image "$work/busybox" busybox \
		'{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["sh"],"WorkingDir":"/"}' \
		"$work/busybox.tar"

	mkdir -p "$work/pause"
	(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -ldflags "-s -w" -o "$work/pause/pause" ./e2e/runtime/tools/pause)
	oci_image "$work/pause" pause '{"Entrypoint":["/pause"],"WorkingDir":"/"}' "$work/pause.tar"

	mkdir -p "$dir"
	rm -f "$dir/$MARKER"
	mv "$work/busybox.tar" "$dir/busybox.tar"
	mv "$work/pause.tar" "$dir/pause.tar"
	echo "$key" >"$dir/$MARKER"
	log "images: built in $((SECONDS - start))s"
}

# --- parts ---

part_containerd() { require_go; build_part containerd "$CONTAINERD_VERSION" build_containerd containerd containerd-shim-runc-v2 ctr; }
part_runc() {
	require_go
	require_apt runc gcc libc6-dev libseccomp-dev pkg-config
	build_part runc "$RUNC_VERSION" build_runc runc
}
part_crictl() { require_go; build_part crictl "$CRICTL_VERSION" build_crictl crictl; }
part_kube() { require_go; build_part kube "$(kube_key)" build_kube "${KUBE_COMMANDS[@]}"; }
part_cni() { require_go; build_part cni "$CNI_PLUGINS_VERSION" build_cni bridge host-local loopback portmap; }
part_helm() { require_go; build_part helm "$HELM_VERSION" build_helm helm; }
part_metrics_server() { require_go; build_part metrics-server "$METRICS_SERVER_VERSION" build_metrics_server metrics-server; }
part_crio() {
	require_go
	require_apt crio gcc libc6-dev libseccomp-dev pkg-config jq
	build_part crio "$CRIO_VERSION" build_crio crio pinns
	# conmon is Debian's; link it so that CACHE/bin is the one PATH entry needed.
	if [[ -x /usr/bin/conmon ]]; then
		link_bin conmon /usr/bin/conmon
	else
		log "crio: /usr/bin/conmon is missing (Debian package conmon); CRI-O cannot run containers without it"
	fi
}
part_crane() { require_go; build_part crane "$CRANE_VERSION" build_crane crane; }
part_images() {
	require_go
	require_apt images busybox-static jq
	build_images
}

main() {
	local targets=("$@") part
	((${#targets[@]})) || targets=(all)
	for part in "${targets[@]}"; do
		[[ $part == all ]] && continue
		[[ " ${PARTS[*]} " == *" $part "* ]] || { log "unknown part '$part'"; usage; }
	done
	[[ " ${targets[*]} " == *" all "* ]] && targets=("${PARTS[@]}")

	mkdir -p "$CACHE"
	CLEANUP=()
	trap 'rm -rf "${CLEANUP[@]}"' EXIT
	# One install at a time per cache: a second one waits, then finds the
	# parts the first one built.
	exec 9>"$CACHE/.install.lock"
	flock -n 9 || { log "waiting for another install.sh on $CACHE"; flock 9; }

	local start=$SECONDS
	for part in "${targets[@]}"; do
		"part_${part//-/_}"
	done
	log "done in $((SECONDS - start))s; $CACHE/bin:$(find "$CACHE/bin" -mindepth 1 -maxdepth 1 -printf ' %f' 2>/dev/null | tr ' ' '\n' | sort | tr '\n' ' ')"
}

main "$@"
