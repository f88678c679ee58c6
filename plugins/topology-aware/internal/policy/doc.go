// Package policy is the pure allocation core of the topology-aware plugin:
// given a machine (common/topology) and a configuration, it decides for each
// container which CPUs and memory nodes it runs on, and why. It does no I/O
// and keeps no clock; the same state and request give the same answer.
//
// The rules, in the order they apply:
//
//  1. Pools. The available CPUs (all by default) hold the reserved CPUs (a
//     set, or a count chosen as the kubelet chooses them), the kernel-isolated
//     CPUs, the exclusive grants, and the shared pool: everything else. The
//     reserved CPUs stay in the shared pool unless the reservation is strict.
//  2. Who gets what. An explicit CPU preference (annotation) decides first:
//     shared, reserved, or isolated (prefer: isolated CPUs if enough are free,
//     else a normal exclusive grant; require: isolated or fail). Then the
//     kubelet's static policy: a Guaranteed container with an integer CPU
//     request gets that many exclusive CPUs, in a reserved namespace too
//     unless the configuration keeps it on the reserved CPUs (and then it is
//     refused, or warned about, when they are fewer than it requests); the
//     other containers of the reserved namespaces run on the reserved CPUs;
//     everything else shares the shared pool, or, under the pod scope, a pod
//     with pod-level resources' own shared pool (podlevel.go).
//  3. Topology Manager (hints.go). For a grant, CPUs, memory and devices
//     offer NUMA hints; the policy (none, best-effort, restricted,
//     single-numa-node) merges them as the kubelet does and admits the
//     container or fails it, saying which resource could not be aligned and
//     where. Under the pod scope (pod.go) a pod's first grant admits the
//     whole pod from its sums and reserves its CPUs and memory; its later
//     containers take their grants from the reservation, on its affinity.
//  4. Choosing CPUs. The NUMA nodes first (nodepref.go): the CPUs of the
//     admitted affinity (of its sockets with align-by-socket), and within
//     them one node whenever one has room, else one socket, else the fewest
//     and closest nodes. Then, within those nodes, exactly as the kubelet's
//     static policy (cpuassign.go): whole sockets and NUMA nodes, then
//     (align-by-uncore-cache) whole uncore caches, then whole cores, then
//     single threads, from the groups with the fewest free CPUs first.
//     distribute-across-numa spreads evenly over the fewest nodes;
//     spread-across-cores takes threads of different cores; full-pcpus-only
//     grants whole cores only (and never a core with a reserved, isolated or
//     unavailable thread). kubelet-packing skips the choice of nodes: the
//     kubelet's own answer over every free CPU.
//  5. Memory (memory.go), as the Memory Manager's static policy: Guaranteed
//     grants hold memory and hugepages on a group of nodes; groups never
//     overlap. The memory follows the CPUs: the group is the nodes of the
//     CPUs whenever a group there can hold it, else those nodes with the
//     rest of the admitted affinity, else the closest group that can, the
//     reason saying why. cpuset.mems is the group, or the nodes of the CPUs;
//     CPU-less memory nodes (HBM, PMEM, CXL) are added, the closest by
//     distance, only for containers that ask for them, and such a grant holds
//     its memory on them too (cpuless.go).
//  6. The shared pool never becomes empty while shared containers exist: a
//     grant that would empty it fails. When it changes, every shared
//     container's placement changes with it, and Allocate, Resize and
//     Release return those placements.
//  7. Resize keeps what it can of an exclusive grant (shrinking within it,
//     growing next to it) and moves containers between shared and exclusive
//     when their class changes; on failure the old placement stays.
//  8. Restart (restore.go): the checkpoint is reconciled with what runs;
//     nothing consistent moves, unknown containers are adopted where they run
//     when consistent, the rest is placed anew, in container id order.
//
// Check verifies the invariants after any step.
package policy
