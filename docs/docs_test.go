package docs

import (
	"encoding/xml"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

// read returns the text of the file at rel, a path from the repository's root.
func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of the section of doc that the heading line opens (given whole, as
// "## Layout"), up to the next heading of its level or above outside a code block; it fails the
// test if there is none.
func section(t *testing.T, doc, name, heading string) string {
	t.Helper()
	level := strings.Index(heading, " ")
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", name, heading)
	}
	lines := strings.Split(doc[start+2+len(heading):], "\n")
	inFence := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if n := strings.Index(l, " "); !inFence && n > 0 && n <= level && strings.Trim(l[:n], "#") == "" {
			return strings.Join(lines[:i], "\n")
		}
	}
	return strings.Join(lines, "\n")
}

// documents are the Markdown files a reader finds: the README and every document in docs/.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil || len(docs) < 6 {
		t.Fatalf("docs/*.md: %v, %v", docs, err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, "docs/"+d)
	}
	return files
}

// TestReadmeIsAMap holds the README to what it is for: a map of at most 300 lines whose Quick
// start is two commands that work on a fresh machine, with a link to every document.
func TestReadmeIsAMap(t *testing.T) {
	readme := read(t, "README.md")
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README.md has %d lines; the map keeps to 300, the rest belongs in docs/", n)
	}
	quick := section(t, readme, "README.md", "## Quick start")
	_, block, ok := strings.Cut(quick, "```sh\n")
	block, _, closed := strings.Cut(block, "```")
	if !ok || !closed {
		t.Fatalf("README's Quick start has no sh block:\n%s", quick)
	}
	var commands []string
	for _, line := range strings.Split(block, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			commands = append(commands, cmd)
		}
	}
	if want := []string{"go run ./cmd/seckill", "make test"}; !slices.Equal(commands, want) {
		t.Errorf("README's Quick start runs %q; want exactly %q", commands, want)
	}
	for _, doc := range []string{"docs/operating.md", "docs/integrating.md", "docs/architecture.md",
		"docs/testing.md", "docs/BENCHMARKS.md", "docs/CAPACITY.md", "docs/img/architecture.svg"} {
		if !strings.Contains(readme, "]("+doc+")") {
			t.Errorf("README.md does not link %s", doc)
		}
	}
}

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)|<img src="([^"]+)"`)
	fence   = regexp.MustCompile("(?ms)^```.*?^```")
	heading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	// A path of the tree as the documents name it, in backquotes.
	treePath = regexp.MustCompile("`((?:cmd|internal|scripts|deploy|docs)/[^`\\s]*)`")
)

// anchors are the ids GitHub gives the headings of a Markdown text: lower case, spaces as
// hyphens, punctuation dropped, a repeated one numbered.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsNumber(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		base := b.String()
		id := base
		for n := 1; ids[id]; n++ {
			id = fmt.Sprintf("%s-%d", base, n)
		}
		ids[id] = true
	}
	return ids
}

// TestDocsLinksResolve: every relative link of the README and the documents reaches a file
// that exists, and a link to a heading (#anchor) reaches a heading that exists; every path of the
// tree a document names in backquotes exists.
func TestDocsLinksResolve(t *testing.T) {
	checked := 0
	for _, name := range documents(t) {
		text := read(t, name)
		for _, m := range link.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
			target := m[1] + m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			rel := path.Join(path.Dir(name), file)
			if file == "" {
				rel = name
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s links %s: %s does not exist", name, target, rel)
				continue
			}
			checked++
			if anchor != "" && !anchors(read(t, rel))[anchor] {
				t.Errorf("%s links %s: %s has no heading #%s", name, target, rel, anchor)
			}
		}
		for _, m := range treePath.FindAllStringSubmatch(text, -1) {
			p := strings.TrimRight(m[1], ".,:;")
			if matches, _ := filepath.Glob(filepath.Join(root, p)); len(matches) == 0 {
				t.Errorf("%s names %s, which does not exist", name, p)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d links: the pattern no longer finds them", checked)
	}
}

var (
	benchSection = regexp.MustCompile(`(?m)^## (\d+)\. `)
	// "BENCHMARKS §6", "docs/BENCHMARKS.md §6" and "§6 of docs/BENCHMARKS.md" cite a section.
	citation      = regexp.MustCompile(`BENCHMARKS(?:\.md)? §(\d+)|§(\d+) of docs/BENCHMARKS\.md`)
	selfCitation  = regexp.MustCompile(`§(\d+)`)
	citingSources = []string{".go", ".sql", ".lua", ".yaml", ".md", ".sh"}
)

// TestBenchmarksSectionsCited: every section of docs/BENCHMARKS.md that the code, the scripts
// or a document cites ("BENCHMARKS §N") exists, and so does every section BENCHMARKS.md cites
// itself ("§N"), so that a renumbered section cannot leave a citation pointing elsewhere.
func TestBenchmarksSectionsCited(t *testing.T) {
	bench := read(t, "docs/BENCHMARKS.md")
	sections := map[string]bool{}
	for _, m := range benchSection.FindAllStringSubmatch(bench, -1) {
		sections[m[1]] = true
	}
	if len(sections) < 10 {
		t.Fatalf("docs/BENCHMARKS.md has sections %v: the headings are no longer '## N. '", sections)
	}
	for _, m := range selfCitation.FindAllStringSubmatch(bench, -1) {
		if !sections[m[1]] {
			t.Errorf("docs/BENCHMARKS.md cites its §%s, which does not exist", m[1])
		}
	}
	cited := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); p != root && (strings.HasPrefix(base, ".") || base == "artifacts" || base == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains(citingSources, filepath.Ext(p)) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range citation.FindAllStringSubmatch(string(b), -1) {
			cited++
			if n := m[1] + m[2]; !sections[n] {
				t.Errorf("%s cites BENCHMARKS §%s, which does not exist", p, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 10 {
		t.Fatalf("found %d citations of BENCHMARKS: the pattern no longer finds them", cited)
	}
}

// goDirs are the directories under cmd/ and internal/ that hold Go code, from the root.
func goDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") {
				rel, _ := filepath.Rel(root, filepath.Dir(p))
				if rel = filepath.ToSlash(rel); !slices.Contains(dirs, rel) {
					dirs = append(dirs, rel)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(dirs) < 30 {
		t.Fatalf("found %d directories of Go code: the walk looked in the wrong place", len(dirs))
	}
	return dirs
}

var (
	layoutPath = regexp.MustCompile(`(?:cmd|internal|scripts|deploy|docs)/[\w./*-]*`)
	layoutFile = regexp.MustCompile(`[\w*-]+\.(?:go|lua|sql|yaml|md|json)\b`)
	grabFile   = regexp.MustCompile("`([a-z]+/[\\w.]+\\.(?:go|lua))`")
)

// TestArchitectureLayout holds docs/architecture.md's Layout to the tree: every directory of Go
// code under cmd/ and internal/ has its row, every path the layout names exists, and every file
// a row names is in that row's directories; every file of the grab's path exists.
func TestArchitectureLayout(t *testing.T) {
	doc := read(t, "docs/architecture.md")
	layout := section(t, doc, "docs/architecture.md", "## Layout")
	_, block, _ := strings.Cut(layout, "```\n")
	block, _, _ = strings.Cut(block, "```")
	if strings.Count(block, "\n") < 40 {
		t.Fatalf("the Layout's block has %d lines: not the layout", strings.Count(block, "\n"))
	}
	named := map[string]bool{}
	for _, p := range layoutPath.FindAllString(block, -1) {
		p = strings.TrimRight(p, ".,;:")
		named[strings.TrimSuffix(p, "/")] = true
		if matches, _ := filepath.Glob(filepath.Join(root, p)); len(matches) == 0 {
			t.Errorf("the layout names %s, which does not exist", p)
		}
	}
	for _, dir := range goDirs(t) {
		if !named[dir] {
			t.Errorf("the layout has no row for %s/, a directory of Go code", dir)
		}
	}
	// A row starts with its directories at the line's start; its files are theirs.
	var rows [][]string
	for _, line := range strings.Split(block, "\n") {
		if line != "" && line[0] != ' ' {
			rows = append(rows, nil)
		}
		if len(rows) > 0 {
			rows[len(rows)-1] = append(rows[len(rows)-1], line)
		}
	}
	for _, row := range rows {
		var dirs []string
		for _, f := range strings.Fields(row[0]) {
			if strings.HasSuffix(f, "/") && layoutPath.MatchString(f) {
				dirs = append(dirs, f)
			}
		}
		text := layoutPath.ReplaceAllString(strings.Join(row, "\n"), "")
		for _, at := range layoutFile.FindAllStringIndex(text, -1) {
			file := text[at[0]:at[1]]
			if at[0] > 0 && text[at[0]-1] == '/' { // a route, as /openapi.json
				continue
			}
			if !inDirs(t, dirs, file) {
				t.Errorf("the layout's row of %v names %s, which none of them holds", dirs, file)
			}
		}
	}
	grabPath := section(t, doc, "docs/architecture.md", "## A grab's path, file by file")
	files := grabFile.FindAllStringSubmatch(grabPath, -1)
	if len(files) < 10 {
		t.Fatalf("the grab's path names %d files: not the path", len(files))
	}
	for _, m := range files {
		if _, err := os.Stat(filepath.Join(root, "internal", m[1])); err != nil {
			t.Errorf("the grab's path names %s, which is not internal/%s", m[1], m[1])
		}
	}
}

// inDirs reports whether a file whose name matches pattern is in one of dirs or below.
func inDirs(t *testing.T, dirs []string, pattern string) bool {
	t.Helper()
	found := false
	for _, dir := range dirs {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if ok, _ := filepath.Match(pattern, d.Name()); ok {
					found = true
					return fs.SkipAll
				}
			}
			return nil
		})
	}
	return found
}

// picture is what docs/img/architecture.svg draws: its boxes (each some packages) and arrows.
type picture struct {
	Groups []struct {
		Class    string `xml:"class,attr"`
		Part     string `xml:"data-part,attr"`
		Packages string `xml:"data-packages,attr"`
		Apart    bool   `xml:"data-apart,attr"`
	} `xml:"g"`
	Paths []struct {
		Class string `xml:"class,attr"`
		From  string `xml:"data-from,attr"`
		To    string `xml:"data-to,attr"`
	} `xml:"path"`
}

// TestArchitecturePicture holds the picture of the README and docs/architecture.md to the code:
// every package of Go code under cmd/ and internal/ is in one box; every arrow is an import of a
// package of one box by a package of the other; every import between two boxes is an arrow, or
// follows a way along the arrows (a box drawn apart, the tests', has its imports left out); and
// the rules the picture shows hold: the domain imports nothing of the project, the edge no
// adapter, an adapter no other adapter, and only the binary builds a node.
func TestArchitecturePicture(t *testing.T) {
	var pic picture
	if err := xml.Unmarshal([]byte(read(t, "docs/img/architecture.svg")), &pic); err != nil {
		t.Fatal(err)
	}
	part := map[string]string{} // package directory -> its box
	apart := map[string]bool{}
	for _, g := range pic.Groups {
		if g.Class != "part" {
			continue
		}
		apart[g.Part] = g.Apart
		for _, p := range strings.Fields(g.Packages) {
			if other, ok := part[p]; ok {
				t.Errorf("%s is in two boxes, %s and %s", p, other, g.Part)
			}
			part[p] = g.Part
		}
	}
	dirs := goDirs(t)
	imports := map[[2]string]bool{} // box -> box, from the packages' own imports
	for _, dir := range dirs {
		box, ok := part[dir]
		if !ok {
			t.Errorf("%s is in no box of the picture", dir)
			continue
		}
		pkg, err := build.Default.ImportDir(filepath.Join(root, dir), 0)
		if err != nil {
			if _, none := err.(*build.NoGoError); none { // test files only
				continue
			}
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			if to, ok := part[strings.TrimPrefix(imp, "seckill/")]; ok && strings.HasPrefix(imp, "seckill/") && to != box {
				imports[[2]string{box, to}] = true
			}
		}
	}
	for p, box := range part {
		if !slices.Contains(dirs, p) {
			t.Errorf("the picture's box %s holds %s, which is no directory of Go code", box, p)
		}
	}
	arrows := map[string][]string{}
	for _, a := range pic.Paths {
		if a.Class != "arrow" {
			continue
		}
		arrows[a.From] = append(arrows[a.From], a.To)
		if !imports[[2]string{a.From, a.To}] {
			t.Errorf("the picture draws %s -> %s, but no package of %s imports one of %s", a.From, a.To, a.From, a.To)
		}
	}
	if len(arrows) < 5 {
		t.Fatalf("the picture has arrows from %d boxes: not the picture", len(arrows))
	}
	reaches := func(from, to string) bool {
		seen, next := map[string]bool{}, slices.Clone(arrows[from])
		for len(next) > 0 {
			b := next[len(next)-1]
			next = next[:len(next)-1]
			if b == to {
				return true
			}
			if !seen[b] {
				seen[b] = true
				next = append(next, arrows[b]...)
			}
		}
		return false
	}
	for imp := range imports {
		if !apart[imp[0]] && !apart[imp[1]] && !reaches(imp[0], imp[1]) {
			t.Errorf("%s imports %s, which the picture's arrows do not reach", imp[0], imp[1])
		}
	}
	adapters := []string{"embedded", "redisstore", "sqlstore"}
	for imp := range imports {
		from, to := imp[0], imp[1]
		switch {
		case from == "sale":
			t.Errorf("the domain imports %s: it imports the standard library only", to)
		case from == "httpapi" && (slices.Contains(adapters, to) || to == "node"):
			t.Errorf("the edge imports %s: it knows no adapter", to)
		case slices.Contains(adapters, from) && slices.Contains(adapters, to):
			t.Errorf("the adapter %s imports the adapter %s", from, to)
		case to == "node" && from != "cmd" && !apart[from]:
			t.Errorf("%s imports node: only the binary builds a node", from)
		}
	}
}
