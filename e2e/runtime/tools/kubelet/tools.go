//go:build tools

// Package tools pins the kubelet that the nri-suite real-node e2e tests run.
//
// It is a module of its own so that k8s.io/kubernetes and its dependency graph
// never enter the main module. install.sh builds k8s.io/kubernetes/cmd/kubelet
// from this module with the committed go.mod and go.sum.
package tools

import _ "k8s.io/kubernetes/cmd/kubelet"
