// Package docs holds seckill's documents: operating.md, integrating.md, architecture.md,
// testing.md, BENCHMARKS.md and CAPACITY.md, the pictures the README shows (img/), the bench
// runs' results and plots (bench/) and the Grafana dashboard and alerts (grafana/). Its tests
// hold the README and the documents to the code: the architecture's picture to the imports, its
// layout to the packages, every link to its target and every cited benchmark section to the
// section.
package docs
