// Package seccomp builds the seccomp policies that the security plugin gives containers
// through NRI: the runtime default profile (moby's, as containerd and Docker apply it) or
// a named profile from a directory of OCI/Docker JSON profiles such as the Security
// Profiles Operator writes, with node-wide extra rules merged in and, on request, in
// complain mode.
//
// Conversion is github.com/moby/profiles/seccomp's: its includes/excludes filtering by
// architecture, kernel version and the container's capabilities. The result goes through
// NRI's own converter (api.FromOCILinuxSeccomp).
//
// Decisions worth knowing:
//   - A profile file is validated completely when it is loaded (strict JSON: an unknown
//     key is an error; default action, actions, architectures, flags, argument indexes and
//     operators, capabilities and architectures in includes/excludes; syscall names must
//     be Linux syscalls on some architecture, because the runtime skips names the node's
//     architecture lacks and profiles derived from Docker's name those of every
//     architecture). What passes cannot fail to build later.
//   - A file that becomes invalid keeps its last valid version in use and is reported
//     (Reload's error, Status): refusing the profile would refuse every new container
//     that names it because of a bad edit. A file that was never valid, and a removed
//     file, cannot be used: such a request fails, and the plugin fails the container.
//   - Profile files are read through an os.Root of the directory: a symlink that leads
//     out of it is an invalid file, so that only what the directory holds is loaded; links
//     inside it (a mounted ConfigMap's "..data") are followed.
//   - Extra rules must name syscalls of the node's architecture, or they would silently do
//     nothing. They take their syscalls out of every rule of the profile, whatever its
//     action, because libseccomp refuses two actions for one syscall.
//   - Profiles are built for the node's architecture only: the node's kernel filters the
//     calls, also those of an emulated foreign-architecture container.
//   - Builds are cached per profile version, complain mode, and the subset of the
//     container's capabilities that the profile's rules are conditioned on. A reloaded
//     profile is a new version; its old builds are dropped with the old version.
package seccomp
