// Package simulate is the `nri-topology-aware simulate` subcommand: it runs
// a workload (pods and the controllers that run them created, resized and
// deleted, plugin restarts) through the plugin itself on any machine's
// topology and reports where every container would run and why, so that
// operators can plan capacity and check a configuration before they deploy
// it.
//
// The simulator is a container runtime around the plugin's own NRI
// handlers (package nriplugin): pod manifests are converted as the kubelet
// and containerd convert them (common/kubepod), the handlers are called in
// containerd's order with the NRI objects containerd would pass, and their
// adjustments and updates (those the plugin pushes through the runtime
// included) are applied to the containers' specs. A restart closes the
// plugin and synchronizes a new one from its checkpoint. After every step
// the plugin's state must satisfy the policy's invariants and every
// container must run where the plugin placed it.
//
// The whole workload is validated before the first step runs. The report
// is a stream of records, one a step, with only what each step changed, a
// text summary with the use of every NUMA node at the peak and at the end,
// or (besides either) an HTML placement map.
package simulate
