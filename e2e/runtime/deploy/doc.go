// Package deploy holds the real-node tests of what deployments/ ships: the
// suite installed the way nodes without Kubernetes run it (`make install`'s
// layout in the runtime's plugin directory, the runtime configured by the
// shipped drop-in, every plugin launched by the runtime itself), and the
// images `make images` writes, loaded into the runtime when the sandbox
// starts and run from the chart's DaemonSets.
package deploy
