package metrics

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// referenceDoc is the operations page whose metrics reference must list
// exactly the metrics New registers.
const referenceDoc = "../docs/operations.md"

// documented is one row of the reference: name, type, labels.
type documented struct {
	typ    string
	labels []string
}

var rowRE = regexp.MustCompile("^\\| `([a-z_]+\\*?)` \\| (counter|gauge|histogram|summary|various) \\| ([^|]*) \\| [^|]+ \\|$")

// readReference parses the rows of the metrics reference table.
func readReference(t *testing.T) map[string]documented {
	t.Helper()
	b, err := os.ReadFile(referenceDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]documented{}
	for line := range strings.SplitSeq(string(b), "\n") {
		m := rowRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		var labels []string
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		if _, dup := rows[m[1]]; dup {
			t.Errorf("%s lists %s twice", referenceDoc, m[1])
		}
		rows[m[1]] = documented{m[2], labels}
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no metrics reference rows (| `name` | type | labels | meaning |)", referenceDoc)
	}
	return rows
}

// touchVecs gives every labelled metric of m one child, so that Gather
// returns it with its type and label names.
func touchVecs(t *testing.T, m *Metrics) {
	t.Helper()
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanInterface() {
			continue
		}
		c, ok := f.Interface().(prometheus.Collector)
		if !ok || f.IsNil() {
			continue
		}
		with := f.MethodByName("WithLabelValues")
		if !with.IsValid() {
			continue
		}
		descs := make(chan *prometheus.Desc, 1)
		c.Describe(descs)
		d := <-descs
		n := strings.Count(regexp.MustCompile(`variableLabels: \{([^}]*)\}`).FindStringSubmatch(d.String())[1], ",") + 1
		args := make([]reflect.Value, n)
		for j := range args {
			args[j] = reflect.ValueOf("x")
		}
		with.Call(args)
	}
}

// TestMetricsReference checks docs/operations.md against the registry both
// ways: every metric registered is documented with its type and labels,
// and every documented metric is registered.
func TestMetricsReference(t *testing.T) {
	doc := readReference(t)
	m := New()
	touchVecs(t, m)
	m.WatchLimiter(func() (int64, int64) { return 0, 0 })
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		live[name] = true
		if !strings.HasPrefix(name, Namespace+"_") {
			// The Go client's runtime and process collectors: one row each.
			prefix := strings.SplitN(name, "_", 2)[0] + "_*"
			if _, ok := doc[prefix]; !ok {
				t.Errorf("%s: %s is registered, but neither it nor %s is documented", referenceDoc, name, prefix)
			}
			continue
		}
		row, ok := doc[name]
		if !ok {
			t.Errorf("%s: %s (%s) is registered but not documented", referenceDoc, name, strings.ToLower(mf.GetType().String()))
			continue
		}
		if typ := strings.ToLower(mf.GetType().String()); row.typ != typ {
			t.Errorf("%s: %s documented as %s, registered as %s", referenceDoc, name, row.typ, typ)
		}
		var labels []string
		for _, l := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		slices.Sort(labels)
		if !slices.Equal(labels, row.labels) {
			t.Errorf("%s: %s documented with labels %v, registered with %v", referenceDoc, name, row.labels, labels)
		}
	}
	for name := range doc {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			found := false
			for l := range live {
				found = found || strings.HasPrefix(l, prefix)
			}
			if !found {
				t.Errorf("%s documents %s, but no registered metric starts with %s", referenceDoc, name, prefix)
			}
			continue
		}
		if !live[name] {
			t.Errorf("%s documents %s, which is not registered", referenceDoc, name)
		}
	}
}

// TestDashboardMetrics: every metric the Grafana dashboard in contrib/
// queries is registered (a renamed metric would leave a panel empty).
func TestDashboardMetrics(t *testing.T) {
	b, err := os.ReadFile("../contrib/grafana/shuffled.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("contrib/grafana/shuffled.json: %v", err)
	}
	m := New()
	touchVecs(t, m)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, mf := range mfs {
		live[mf.GetName()] = true
	}
	nameRE := regexp.MustCompile(`\b((?:shuffled|process|go)_[a-z_]+)`)
	queried := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range nameRE.FindAllStringSubmatch(tg.Expr, -1) {
				name := m[1]
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, ok := strings.CutSuffix(name, suffix); ok && live[base] {
						name = base
					}
				}
				queried++
				if !live[name] {
					t.Errorf("panel %q queries %s, which is not registered", p.Title, m[1])
				}
			}
		}
	}
	if queried == 0 {
		t.Error("the dashboard queries no metric")
	}
}
