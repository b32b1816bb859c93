// Command promqlcheck parses every PromQL expression of a Grafana
// dashboard (JSON) and of a PrometheusRule (YAML) with Prometheus' own
// parser, and prints as JSON what each expression reads: every selector's
// metric name and label matchers, and every label it groups or matches by
// (by, without, on, ignoring, group_left, group_right, the source labels
// of label_replace and label_join) with the metrics beneath that clause.
// meshpilot's tests hold these against a running meshpilot's /metrics.
//
//	promqlcheck FILE...
//	promqlcheck --version     # the Prometheus module whose parser it uses
//
// A file whose expression does not parse, or a rule Prometheus would
// refuse, makes it exit 1 naming the file, the panel or alert, and the
// position in the expression.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// maxFileBytes bounds what is read of one file: a dashboard or a rule
// file is a few tens of KiB.
const maxFileBytes = 4 << 20

// Output is what promqlcheck prints.
type Output struct {
	Expressions []Expression `json:"expressions"`
}

// Expression is one parsed expression and what it reads.
type Expression struct {
	File      string     `json:"file"`
	Where     string     `json:"where"`
	Expr      string     `json:"expr"`
	Selectors []Selector `json:"selectors"`
	Groupings []Grouping `json:"groupings,omitempty"`
}

// Selector is one vector selector: its metric name ("" when it names
// none) and its other matchers.
type Selector struct {
	Metric   string    `json:"metric"`
	Matchers []Matcher `json:"matchers,omitempty"`
}

// Matcher is one label matcher.
type Matcher struct {
	Label string `json:"label"`
	Op    string `json:"op"`
	Value string `json:"value"`
}

// Grouping is one clause that names labels, and the metrics of the
// selectors it applies to, each of which must carry them.
type Grouping struct {
	Clause  string   `json:"clause"`
	Labels  []string `json:"labels"`
	Metrics []string `json:"metrics"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promqlcheck FILE...")
		os.Exit(2)
	}
	if os.Args[1] == "--version" {
		fmt.Println(parserVersion())
		return
	}
	var out Output
	failed := false
	for _, file := range os.Args[1:] {
		exprs, err := checkFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
			continue
		}
		out.Expressions = append(out.Expressions, exprs...)
	}
	if failed {
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func checkFile(file string) ([]Expression, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxFileBytes)
	}
	var exprs []Expression
	if strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		exprs, err = dashboard(data)
	} else {
		exprs, err = prometheusRule(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for i := range exprs {
		exprs[i].File = file
	}
	return exprs, nil
}

var promql = parser.NewParser(parser.Options{})

// parse parses expr and lists what it reads; where names it in errors.
func parse(where, expr string) (Expression, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return Expression{}, fmt.Errorf("%s: %q: %w", where, expr, err)
	}
	x := Expression{Where: where, Expr: expr, Selectors: []Selector{}}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			x.Selectors = append(x.Selectors, selector(n))
		case *parser.AggregateExpr:
			if len(n.Grouping) > 0 {
				clause := "by"
				if n.Without {
					clause = "without"
				}
				x.Groupings = append(x.Groupings, grouping(clause, n.Grouping, n.Expr))
			}
		case *parser.BinaryExpr:
			if m := n.VectorMatching; m != nil {
				if len(m.MatchingLabels) > 0 {
					clause := "ignoring"
					if m.On {
						clause = "on"
					}
					x.Groupings = append(x.Groupings, grouping(clause, m.MatchingLabels, n))
				}
				// The included labels come from the side of higher
				// cardinality ("one"): group_left takes them from the right.
				switch {
				case len(m.Include) > 0 && m.Card == parser.CardManyToOne:
					x.Groupings = append(x.Groupings, grouping("group_left", m.Include, n.RHS))
				case len(m.Include) > 0 && m.Card == parser.CardOneToMany:
					x.Groupings = append(x.Groupings, grouping("group_right", m.Include, n.LHS))
				}
			}
		case *parser.Call:
			switch n.Func.Name {
			case "label_replace": // (v, dst, replacement, src, regex)
				if len(n.Args) == 5 {
					if src, ok := n.Args[3].(*parser.StringLiteral); ok && src.Val != "" {
						x.Groupings = append(x.Groupings, grouping("label_replace", []string{src.Val}, n.Args[0]))
					}
				}
			case "label_join": // (v, dst, separator, src...)
				var srcs []string
				for _, a := range n.Args[min(3, len(n.Args)):] {
					if s, ok := a.(*parser.StringLiteral); ok {
						srcs = append(srcs, s.Val)
					}
				}
				if len(srcs) > 0 {
					x.Groupings = append(x.Groupings, grouping("label_join", srcs, n.Args[0]))
				}
			}
		}
		return nil
	})
	return x, nil
}

func selector(v *parser.VectorSelector) Selector {
	s := Selector{Metric: v.Name}
	for _, m := range v.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type.String() == "=" {
			s.Metric = m.Value
			continue
		}
		s.Matchers = append(s.Matchers, Matcher{Label: m.Name, Op: m.Type.String(), Value: m.Value})
	}
	return s
}

func grouping(clause string, labels []string, under parser.Node) Grouping {
	g := Grouping{Clause: clause, Labels: slices.Clone(labels), Metrics: []string{}}
	parser.Inspect(under, func(n parser.Node, _ []parser.Node) error {
		if v, ok := n.(*parser.VectorSelector); ok {
			if name := selector(v).Metric; !slices.Contains(g.Metrics, name) {
				g.Metrics = append(g.Metrics, name)
			}
		}
		return nil
	})
	sort.Strings(g.Metrics)
	return g
}

// prometheusRule reads a PrometheusRule (monitoring.coreos.com/v1): each
// rule's expression is parsed here, so that an error names its group and
// rule, then the groups are validated as Prometheus loads a rule file
// (durations, label names, annotation templates).
func prometheusRule(data []byte) ([]Expression, error) {
	var doc struct {
		APIVersion string    `yaml:"apiVersion"`
		Kind       string    `yaml:"kind"`
		Spec       yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.APIVersion != "monitoring.coreos.com/v1" || doc.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("apiVersion %q kind %q: want monitoring.coreos.com/v1 PrometheusRule", doc.APIVersion, doc.Kind)
	}
	var spec rulefmt.RuleGroups
	if err := doc.Spec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if len(spec.Groups) == 0 {
		return nil, errors.New("spec: no rule groups")
	}
	var exprs []Expression
	for _, g := range spec.Groups {
		if len(g.Rules) == 0 {
			return nil, fmt.Errorf("group %q: no rules", g.Name)
		}
		for i, r := range g.Rules {
			where := fmt.Sprintf("group %q rule %d", g.Name, i)
			if r.Alert != "" {
				where = fmt.Sprintf("group %q alert %q", g.Name, r.Alert)
			} else if r.Record != "" {
				where = fmt.Sprintf("group %q record %q", g.Name, r.Record)
			}
			x, err := parse(where, r.Expr)
			if err != nil {
				return nil, err
			}
			exprs = append(exprs, x)
		}
	}
	var spec2 bytes.Buffer
	enc := yaml.NewEncoder(&spec2)
	if err := enc.Encode(&doc.Spec); err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, errs := rulefmt.Parse(spec2.Bytes(), false, model.UTF8Validation, promql, quiet); len(errs) > 0 {
		return nil, fmt.Errorf("spec (as a Prometheus rule file): %w", errors.Join(errs...))
	}
	return exprs, nil
}

// Grafana's own variables: the intervals become a duration, the others a
// number, so that the expression parses as Prometheus will see it.
var builtins = map[string]string{
	"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__auto": "1m",
	"__interval_ms": "60000", "__range_ms": "3600000", "__range_s": "3600",
}

// variableRef matches Grafana's forms: $name, ${name}, ${name:format} and
// [[name]].
var variableRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[^}]*)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]`)

// substitute replaces the dashboard's variables: builtins by their value,
// the dashboard's own by "value" (they stand in label values), and fails
// on a variable the dashboard does not define.
func substitute(expr string, defined map[string]bool) (string, error) {
	var undefined []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if v, ok := builtins[name]; ok {
			return v
		}
		if defined[name] {
			return "value"
		}
		undefined = append(undefined, "$"+name)
		return ref
	})
	if len(undefined) > 0 {
		return "", fmt.Errorf("%q: undefined variable %s", expr, strings.Join(undefined, ", "))
	}
	return out, nil
}

type panel struct {
	ID      int     `json:"id"`
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// labelValues matches the Prometheus data source's variable queries
// label_values(selector, label) and label_values(label); queryResult
// query_result(expr).
var (
	labelValues = regexp.MustCompile(`^\s*label_values\((?:(.*),)?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
)

// dashboard reads a Grafana dashboard: every target of every panel (rows'
// panels included) and every query variable.
func dashboard(data []byte) ([]Expression, error) {
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []variable `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	var exprs []Expression
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				return nil, fmt.Errorf("variable %q: query: %w", v.Name, err)
			}
			q = obj.Query
		}
		where := fmt.Sprintf("variable %q", v.Name)
		q, err := substitute(q, defined)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		switch {
		case labelValues.MatchString(q):
			m := labelValues.FindStringSubmatch(q)
			sel := m[1]
			if strings.TrimSpace(sel) == "" {
				return nil, fmt.Errorf("%s: %q: name a metric, or the variable lists every series' label", where, q)
			}
			x, err := parse(where, sel)
			if err != nil {
				return nil, err
			}
			x.Groupings = append(x.Groupings, grouping("label_values", []string{m[2]}, mustParse(sel)))
			exprs = append(exprs, x)
		case queryResult.MatchString(q):
			x, err := parse(where, queryResult.FindStringSubmatch(q)[1])
			if err != nil {
				return nil, err
			}
			exprs = append(exprs, x)
		default:
			return nil, fmt.Errorf("%s: %q: not a label_values or query_result query", where, q)
		}
	}
	var walk func(ps []panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			for _, t := range p.Targets {
				where := fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, t.RefID)
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("%s: no expr", where)
				}
				e, err := substitute(t.Expr, defined)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				x, err := parse(where, e)
				if err != nil {
					return err
				}
				exprs = append(exprs, x)
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	if len(exprs) == 0 {
		return nil, errors.New("no expressions: not a Grafana dashboard")
	}
	return exprs, nil
}

// mustParse parses what parse has parsed already.
func mustParse(expr string) parser.Expr {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		panic(err)
	}
	return e
}

// parserVersion names the Prometheus module built in.
func parserVersion() string {
	const module = "github.com/prometheus/prometheus"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == module {
				return "promqlcheck: " + module + " " + d.Version
			}
		}
	}
	return "promqlcheck: " + module + " (version unknown)"
}
