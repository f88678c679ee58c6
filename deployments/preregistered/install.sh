#!/usr/bin/env bash
# Installs the suite's plugins as pre-registered NRI plugins: the runtime
# (containerd or CRI-O, see deployments/containerd and deployments/crio)
# starts every NN-name executable of its plugin directory itself and hands it
# NN-name.conf from its plugin config directory. `make install` runs this.
#
#   install.sh [--uninstall] BIN_DIR
#
# BIN_DIR holds nri-<plugin> binaries and nri-sidecar-helper (make static).
# Environment:
#   DESTDIR         staging root prepended to every path (packaging); default none
#   PREFIX          where the sidecar helper goes: PREFIX/libexec/nri-suite; default /usr/local
#   NRI_PLUGIN_DIR  the runtime's plugin directory; default /opt/nri/plugins
#   NRI_CONF_DIR    the runtime's plugin config directory; default /etc/nri/conf.d
#   PLUGINS         plugins to install, space-separated; default all five
#
# A configuration that exists already is kept (it may hold the operator's
# edits) and reported; --uninstall removes what an install put there,
# configurations included. Restart the runtime afterwards: it starts
# pre-registered plugins only when it starts.
set -euo pipefail
DESTDIR=${DESTDIR:-}

# The NRI index of each plugin: the order in which they see a container.
declare -A IDX=([device-injector]=10 [sidecar-order]=20 [topology-aware]=30 [security]=40 [stats]=90)
ALL="device-injector sidecar-order topology-aware security stats"
HELPER=nri-sidecar-helper

die() { echo "install.sh: $*" >&2; exit 1; }

uninstall=false
if [[ ${1:-} == --uninstall ]]; then
	uninstall=true
	shift
fi
[[ $# -eq 1 ]] || die "usage: install.sh [--uninstall] BIN_DIR"
bindir=$1
prefix=${PREFIX:-/usr/local}
plugin_dir=${NRI_PLUGIN_DIR:-/opt/nri/plugins}
conf_dir=${NRI_CONF_DIR:-/etc/nri/conf.d}
libexec_dir=$prefix/libexec/nri-suite
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for dir in "$prefix" "$plugin_dir" "$conf_dir"; do
	[[ $dir == /* ]] || die "PREFIX, NRI_PLUGIN_DIR and NRI_CONF_DIR must be absolute paths, got $dir"
done

plugins=${PLUGINS:-$ALL}
for p in $plugins; do
	[[ -n ${IDX[$p]:-} ]] || die "PLUGINS: unknown plugin \"$p\", expected some of: $ALL"
done

if $uninstall; then
	for p in $plugins; do
		rm -f "$DESTDIR$plugin_dir/${IDX[$p]}-$p" "$DESTDIR$conf_dir/${IDX[$p]}-$p.conf"
	done
	[[ " $plugins " == *" sidecar-order "* ]] && rm -f "$DESTDIR$libexec_dir/$HELPER"
	rmdir "$DESTDIR$libexec_dir" 2>/dev/null || true
	echo "uninstalled: $plugins (restart the runtime to stop them)"
	exit 0
fi

# Check everything before changing anything.
for p in $plugins; do
	[[ -x $bindir/nri-$p ]] || die "plugin $p: $bindir/nri-$p is missing or not executable (run make static)"
done
if [[ " $plugins " == *" sidecar-order "* ]]; then
	[[ -x $bindir/$HELPER ]] || die "sidecar-order: $bindir/$HELPER is missing or not executable (run make static)"
fi

install -d -m 0755 "$DESTDIR$plugin_dir" "$DESTDIR$conf_dir"
# The plugin directory may hold nothing but NN-name executables: NRI refuses
# to start any plugin otherwise.
for f in "$DESTDIR$plugin_dir"/*; do
	[[ -e $f ]] || continue
	[[ $(basename "$f") =~ ^[0-9][0-9]-[a-z0-9._-]+$ ]] || echo "warning: $f is not named NN-name: the runtime will refuse to start any plugin" >&2
done

# The plugins not installed, as NN-name|NN-name: security's
# annotation-plugins loses their lines, so that it refuses no pod for a
# plugin this node does not run.
absent=
for p in $ALL; do
	[[ " $plugins " == *" $p "* ]] || absent+=${absent:+|}${IDX[$p]}-$p
done

# config_for prints plugin $1's configuration as shipped: a .conf.in names
# the sidecar helper's directory, which only the install knows.
config_for() {
	local template=$here/conf.d/${IDX[$1]}-$1.conf.in
	if [[ -e $template ]]; then
		sed "s|@LIBEXECDIR@|$libexec_dir|g" "$template"
	else
		cat "$here/conf.d/${IDX[$1]}-$1.conf"
	fi | sed -E "${absent:+/^    [a-z0-9.-]+: ($absent)\$/d}"
}

for p in $plugins; do
	name=${IDX[$p]}-$p
	install -m 0755 "$bindir/nri-$p" "$DESTDIR$plugin_dir/$name"
	echo "installed $DESTDIR$plugin_dir/$name"
	conf=$DESTDIR$conf_dir/$name.conf
	if [[ -e $conf ]] && ! cmp -s <(config_for "$p") "$conf"; then
		echo "kept $conf: it differs from the shipped configuration (deployments/preregistered/conf.d)"
	else
		config_for "$p" > "$conf.tmp"
		chmod 0644 "$conf.tmp"
		mv -f "$conf.tmp" "$conf"
		echo "installed $conf"
	fi
done
if [[ " $plugins " == *" sidecar-order "* ]]; then
	install -D -m 0755 "$bindir/$HELPER" "$DESTDIR$libexec_dir/$HELPER"
	echo "installed $DESTDIR$libexec_dir/$HELPER"
fi
echo "installed: $plugins into $DESTDIR$plugin_dir (restart the runtime to start them)"
