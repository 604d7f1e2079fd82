package archtest

import (
	"strings"
	"testing"
)

// TestCheckRefuses feeds check imports that point the wrong way, one at a
// time, and wants each named; the same packages with only allowed imports
// pass.
func TestCheckRefuses(t *testing.T) {
	rules := map[string]rule{
		"writer":          {line: 1, may: []string{"codec"}},
		"codec":           {line: 2, may: []string{"internal/xxh32"}},
		"server":          {line: 3, may: []string{"writer"}},
		"internal/xxh32":  {line: 4},
		"testkit":         {line: 5},
		"testkit/tmpfs":   {line: 6},
		"testkit/shuffle": {line: 7, may: []string{"codec"}},
	}
	fine := func() map[string]*pkg {
		return map[string]*pkg{
			"writer":          {prod: map[string][]string{"codec": {"w.go"}}, test: map[string][]string{"testkit": {"w_test.go"}, "server": {"x_test.go"}}},
			"codec":           {prod: map[string][]string{"internal/xxh32": {"lz4.go"}}, test: map[string][]string{}},
			"server":          {prod: map[string][]string{"writer": {"s.go"}}, test: map[string][]string{"testkit/tmpfs": {"s_test.go"}}},
			"internal/xxh32":  {prod: map[string][]string{}, test: map[string][]string{}},
			"testkit":         {prod: map[string][]string{}, test: map[string][]string{}},
			"testkit/tmpfs":   {prod: map[string][]string{}, test: map[string][]string{}},
			"testkit/shuffle": {prod: map[string][]string{"codec": {"sh.go"}}, test: map[string][]string{}},
		}
	}
	if errs := check(fine(), rules); len(errs) != 0 {
		t.Fatalf("check of allowed imports = %v, want none", errs)
	}
	for _, c := range []struct {
		name string
		edit func(map[string]*pkg)
		want string
	}{
		{"up", func(p map[string]*pkg) { p["writer"].prod["server"] = []string{"w.go"} }, "writer (w.go) imports server, which its row"},
		{"unlisted", func(p map[string]*pkg) { p["codec"].prod["writer"] = []string{"lz4.go"} }, "codec (lz4.go) imports writer"},
		{"no row", func(p map[string]*pkg) { p["ingest"] = &pkg{prod: map[string][]string{}, test: map[string][]string{}} }, "package ingest has no row"},
		{"testkit in production", func(p map[string]*pkg) { p["server"].prod["testkit/tmpfs"] = []string{"s.go"} }, "production code never imports testkit"},
		{"internal up", func(p map[string]*pkg) { p["internal/xxh32"].prod["codec"] = []string{"x.go"} }, "internal/ holds production leaves"},
		{"testkit leaf", func(p map[string]*pkg) { p["testkit"].test["codec"] = []string{"t_test.go"} }, "testkit (t_test.go) imports codec: it must import nothing"},
	} {
		p := fine()
		c.edit(p)
		errs := check(p, rules)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) {
			t.Errorf("%s: check = %v, want one error containing %q", c.name, errs, c.want)
		}
	}
}
