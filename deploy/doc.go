// Package deploy holds seckill's deployment files: the image (Dockerfile), a compose file of the
// distributed mode (compose.yaml, compose/) and Kubernetes manifests (k8s/). Its tests build the
// binary as the Dockerfile does and check every file against it.
package deploy
