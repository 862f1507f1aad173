package metrics_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOperatingDocNamesEveryMetric holds the list of metrics in docs/operating.md's Monitoring to
// the metrics this package defines: every metric has its row there, and every seckill_ metric
// the README or a document names (a histogram's _bucket, _sum and _count included) is one this
// package defines, so that a renamed or a new metric cannot leave an operator reading the wrong
// name.
func TestOperatingDocNamesEveryMetric(t *testing.T) {
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	literal := regexp.MustCompile(`"(seckill_[a-z_]+)"`)
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
	}
	if len(defined) < 20 {
		t.Fatalf("found %d metrics in the package: the pattern no longer finds them", len(defined))
	}

	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, monitoring, ok := strings.Cut(string(doc), "\n## Monitoring\n")
	if !ok {
		t.Fatal("docs/operating.md has no Monitoring section")
	}
	monitoring, _, _ = strings.Cut(monitoring, "\n## ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(seckill_[a-z_]+)` \\|").FindAllStringSubmatch(monitoring, -1) {
		rows[m[1]] = true
	}
	for name := range defined {
		if !rows[name] {
			t.Errorf("docs/operating.md's list of metrics has no row for %s", name)
		}
	}

	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`seckill_[a-z_]+`)
	for _, f := range append(files, "../../README.md") {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(text), -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && defined[b] {
					base = b
				}
			}
			if !defined[base] {
				t.Errorf("%s names the metric %s, which the node does not export", filepath.Base(f), n)
			}
		}
	}
}
