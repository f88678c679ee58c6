#!/usr/bin/env bash
# verify.sh checks what install.sh built: every binary in CACHE/bin reports its
# version, and both images import into a throwaway containerd (private root,
# state, sockets and config; stopped by PID and cleaned up afterwards) under
# the names the tests use, and a busybox container runs in it. It also pushes
# the images to a loopback-only crane registry, the way they reach CRI-O.
#
#   e2e/runtime/tools/verify.sh        (as root, after install.sh all)
set -euo pipefail

CACHE=${NRI_SUITE_CACHE:-/var/cache/nri-suite}
BIN=$CACHE/bin
IMAGES=$CACHE/images
PREFIX=localhost/nri-suite

log() { printf '%s verify.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "must run as root (it starts containerd)"

check_versions() {
	local -A want=(
		[containerd]="containerd --version" [containerd-shim-runc-v2]="containerd-shim-runc-v2 -v"
		[ctr]="ctr --version" [runc]="runc --version" [crictl]="crictl --version"
		[kubelet]="kubelet --version" [crio]="crio --version" [crane]="crane version"
		[conmon]="conmon --version" [etcd]="etcd --version" [kube-apiserver]="kube-apiserver --version"
		[kube-controller-manager]="kube-controller-manager --version" [kube-scheduler]="kube-scheduler --version"
		[kube-proxy]="kube-proxy --version"
		[kubectl]="kubectl version --client" [helm]="helm version --short" [metrics-server]="metrics-server --version"
		[bridge]="bridge --version"
		[host-local]="host-local --version" [loopback]="loopback --version" [portmap]="portmap --version"
	)
	local name out
	for name in containerd containerd-shim-runc-v2 ctr runc crictl kubelet kube-proxy etcd kube-apiserver \
		kube-controller-manager kube-scheduler kubectl helm metrics-server bridge host-local loopback portmap crio crane conmon; do
		[[ -x $BIN/$name ]] || die "$BIN/$name is missing: run install.sh"
		# shellcheck disable=SC2086 # the command line is split on purpose
		out=$("$BIN"/${want[$name]} 2>&1) || die "$name: '${want[$name]}' failed: $out"
		log "$name: $(head -n 3 <<<"$out" | tr '\n' ' ')"
	done
	# pinns has no version flag: without arguments it must refuse to run.
	[[ -x $BIN/pinns ]] || die "$BIN/pinns is missing: run install.sh"
	if out=$("$BIN/pinns" 2>&1); then die "pinns without arguments succeeded: $out"; fi
	file -L "$BIN/pinns" 2>/dev/null | grep -q 'statically linked' || log "pinns: not reported as static by file(1)"
	log "pinns: runs (${out%%$'\n'*})"
}

WORK=
CGROUP=
CONTAINERD_PID=
REGISTRY_PID=

cleanup() {
	local pid mnt
	for pid in $CONTAINERD_PID $REGISTRY_PID; do
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	done
	[[ -z $CGROUP ]] || rmdir /sys/fs/cgroup/*/"$CGROUP" 2>/dev/null || true
	[[ -n $WORK ]] || return 0
	# Deepest mounts first: snapshots and shm under the private root/state.
	while read -r mnt; do
		umount "$mnt" || umount -l "$mnt" || log "could not unmount $mnt"
	done < <(awk -v p="$WORK/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r)
	rm -rf "$WORK"
}
trap cleanup EXIT

start_containerd() {
	WORK=$(mktemp -d /tmp/nri-suite-verify.XXXXXX)
	mkdir -p "$WORK/root" "$WORK/state" "$WORK/tmp"
	cat >"$WORK/config.toml" <<EOF
version = 3
root = '$WORK/root'
state = '$WORK/state'
disabled_plugins = ['io.containerd.nri.v1.nri']
[grpc]
  address = '$WORK/containerd.sock'
[ttrpc]
  address = '$WORK/containerd.sock.ttrpc'
[debug]
  address = ''
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = '$PREFIX/pause:latest'
EOF
	PATH=$BIN:$PATH TMPDIR=$WORK/tmp "$BIN/containerd" --config "$WORK/config.toml" >"$WORK/containerd.log" 2>&1 &
	CONTAINERD_PID=$!
	for _ in $(seq 100); do
		"$BIN/ctr" --address "$WORK/containerd.sock" version >/dev/null 2>&1 && return 0
		kill -0 "$CONTAINERD_PID" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 20 "$WORK/containerd.log" >&2
	die "containerd did not come up on $WORK/containerd.sock"
}

ctr_() { PATH=$BIN:$PATH "$BIN/ctr" --address "$WORK/containerd.sock" -n k8s.io "$@"; }

check_import() {
	local name ref out
	for name in busybox pause; do
		ref=$PREFIX/$name:latest
		out=$(ctr_ images import "$IMAGES/$name.tar" 2>&1) || die "ctr images import $IMAGES/$name.tar: $out"
		ctr_ images check "name==$ref" 2>/dev/null | grep -q 'complete' || die "$ref is not listed complete after import: $(ctr_ images ls 2>&1)"
		log "imported $ref"
	done
	out=$("$BIN/crictl" --runtime-endpoint "unix://$WORK/containerd.sock" images 2>&1) || die "crictl images: $out"
	for name in busybox pause; do
		grep -q "^$PREFIX/$name *latest" <<<"$out" || die "CRI does not list $PREFIX/$name:latest: $out"
	done
	log "CRI lists both images"
	# A cgroup of its own, at the top, so that no parent is left behind.
	CGROUP=nri-suite-verify-$$
	out=$(ctr_ run --rm --cgroup "/$CGROUP" "$PREFIX/busybox:latest" nri-suite-verify \
		sh -c 'which sh cat sleep env nc wget && echo hello | cat') ||
		die "running busybox failed: $out"
	grep -qx hello <<<"$out" || die "busybox container printed no hello: $out"
	log "busybox runs: $(tr '\n' ' ' <<<"$out")"
	check_pause
}

# check_pause runs the pause image and stops it the way a runtime stops a
# sandbox: SIGTERM, after which pause must exit 0.
check_pause() {
	local id=nri-suite-verify-pause run_pid rc=0
	ctr_ run --rm --cgroup "/$CGROUP" "$PREFIX/pause:latest" "$id" >/dev/null 2>&1 &
	run_pid=$!
	for _ in $(seq 100); do
		ctr_ task ls 2>/dev/null | grep -q "^$id .*RUNNING" && break
		sleep 0.1
	done
	# Retried: a signal that lands before pause has set up its handlers is
	# ignored, as for any PID 1.
	for _ in $(seq 20); do
		ctr_ task kill --signal SIGTERM "$id" >/dev/null 2>&1 || true
		kill -0 "$run_pid" 2>/dev/null || break
		sleep 0.25
	done
	wait "$run_pid" || rc=$?
	((rc == 0)) || die "pause exited $rc on SIGTERM (expected 0)"
	log "pause runs and exits 0 on SIGTERM"
}

check_registry() {
	local port='' out digest
	"$BIN/crane" registry serve --address 127.0.0.1:0 >"$WORK/registry.log" 2>&1 &
	REGISTRY_PID=$!
	for _ in $(seq 100); do
		port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$WORK/registry.log")
		[[ -n $port ]] && break
		kill -0 "$REGISTRY_PID" 2>/dev/null || break
		sleep 0.1
	done
	[[ -n $port ]] || die "crane registry did not start: $(cat "$WORK/registry.log")"
	# The archive as it is (docker-style manifest.json), then as an OCI
	# layout, which keeps the manifest digest of index.json.
	out=$("$BIN/crane" push --insecure "$IMAGES/busybox.tar" "127.0.0.1:$port/nri-suite/busybox:tar" 2>&1) ||
		die "crane push of the archive: $out"
	mkdir -p "$WORK/layout"
	tar -xf "$IMAGES/busybox.tar" -C "$WORK/layout"
	out=$("$BIN/crane" push --insecure "$WORK/layout" "127.0.0.1:$port/nri-suite/busybox:latest" 2>&1) ||
		die "crane push of the OCI layout: $out"
	digest=$("$BIN/crane" digest --insecure "127.0.0.1:$port/nri-suite/busybox:latest")
	[[ $digest == "$(jq -r '.manifests[0].digest' "$WORK/layout/index.json")" ]] ||
		die "the registry's digest $digest differs from index.json's"
	log "crane registry on 127.0.0.1:$port serves busybox ($digest)"
}

check_versions
start_containerd
check_import
check_registry
log "all checks passed"
