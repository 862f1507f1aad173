package sqlstore

import (
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureDocListsEveryTable holds the tables of docs/architecture.md to the migrations:
// every table the migrations of any dialect leave (created and not dropped or renamed away, in
// their order) has its row, and every row is such a table.
func TestArchitectureDocListsEveryTable(t *testing.T) {
	statement := regexp.MustCompile(`(?i)create table (?:if not exists )?(\w+)|drop table (?:if exists )?(\w+)|alter table (\w+) rename to (\w+)`)
	tables := map[string]bool{}
	dialects, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dialects {
		files, err := fs.Glob(migrations, path.Join("migrations", d.Name(), "*.sql"))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(files)
		left := map[string]bool{}
		for _, f := range files {
			src, err := fs.ReadFile(migrations, f)
			if err != nil {
				t.Fatal(err)
			}
			up, _, _ := strings.Cut(string(src), "+goose Down")
			for _, m := range statement.FindAllStringSubmatch(up, -1) {
				switch {
				case m[1] != "":
					left[strings.ToLower(m[1])] = true
				case m[2] != "":
					delete(left, strings.ToLower(m[2]))
				default:
					delete(left, strings.ToLower(m[3]))
					left[strings.ToLower(m[4])] = true
				}
			}
		}
		for name := range left {
			tables[name] = true
		}
	}
	if len(tables) < 10 {
		t.Fatalf("the migrations leave %d tables: they were not all read", len(tables))
	}

	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## The tables\n")
	if !ok {
		t.Fatal("docs/architecture.md has no section on the tables")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(section, -1) {
		rows[m[1]] = true
	}
	for name := range tables {
		if !rows[name] {
			t.Errorf("docs/architecture.md's tables have no row for %s, which the migrations create", name)
		}
	}
	for name := range rows {
		if !tables[name] {
			t.Errorf("docs/architecture.md lists the table %s, which no migration leaves", name)
		}
	}
}
