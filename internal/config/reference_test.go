package config

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/dualmap/dualmap/scheduler"
)

var updateReference = flag.Bool("update", false, "rewrite docs/configuration.md from the config structs")

const referencePath = "../../docs/configuration.md"

// TestConfigReference: docs/configuration.md is generated from the config
// structs (keys, types, defaults and their doc comments) and the policies'
// parameters; it fails when either drifts. Refresh it with
//
//	go test ./internal/config -run TestConfigReference -update
func TestConfigReference(t *testing.T) {
	got, err := configReference()
	if err != nil {
		t.Fatal(err)
	}
	if *updateReference {
		if err := os.WriteFile(referencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/configuration.md is out of date with the config structs: go test ./internal/config -run TestConfigReference -update")
	}
}

// TestConfigReferenceCoversEveryKey: every key of the defaults file is in
// the reference's table (a struct the walk missed would drop keys).
func TestConfigReferenceCoversEveryKey(t *testing.T) {
	ref, err := configReference()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"listen.grpc", "grpc.tls.mode", "pools[].dns.name", "pools[].xds.address", "state.redis.tls_ca_file", "tracing.sampler_arg", "limits.max_queue_wait", "routing.mode", "objectives"} {
		if !bytes.Contains(ref, []byte("| `"+key+"` |")) {
			t.Errorf("reference has no row for %s", key)
		}
	}
}

// fieldDocs maps "Type.Field" to the field's doc comment, from the
// package's source.
func fieldDocs() (map[string]string, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			// A field right under a documented one, with no comment of
			// its own, shares that comment when it has the same type
			// or extends its key (tls, tls_ca_file).
			prevLine, docType, docTag := -1, "", ""
			for _, fl := range st.Fields.List {
				text := ""
				if fl.Doc != nil {
					text = fl.Doc.Text()
				}
				if fl.Comment != nil {
					text = strings.TrimSpace(text + " " + fl.Comment.Text())
				}
				line := fset.Position(fl.Pos()).Line
				typ := types.ExprString(fl.Type)
				tag := ""
				if fl.Tag != nil {
					tag = strings.Split(reflect.StructTag(strings.Trim(fl.Tag.Value, "`")).Get("yaml"), ",")[0]
				}
				switch {
				case fl.Doc != nil:
					docType, docTag = typ, tag
				case text == "" && docType != "" && line == prevLine+1 && (typ == docType || strings.HasPrefix(tag, docTag+"_")):
					text = sameAsAbove
				default:
					docType = ""
				}
				prevLine = fset.Position(fl.End()).Line
				for _, nm := range fl.Names {
					docs[ts.Name.Name+"."+nm.Name] = oneLine(text)
				}
			}
			return true
		})
	}
	return docs, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

type row struct{ key, typ, def, doc string }

// sameAsAbove marks a field documented by the comment of the field above.
const sameAsAbove = "\x00"

func configReference() ([]byte, error) {
	docs, err := fieldDocs()
	if err != nil {
		return nil, err
	}
	d := Config{Pools: []Pool{{Instances: []Instance{{Address: "127.0.0.1:8000"}}, DNS: &DNS{}, XDS: &XDS{}}}}.WithDefaults()
	d.Pools[0].DNS = nil // a pool has instances, dns or xds: defaults shown per key below
	d.Pools[0].XDS = nil
	xdsDefaults := XDS{}.withDefaults()
	var rows []row
	var walk func(prefix string, t reflect.Type, v reflect.Value)
	walk = func(prefix string, t reflect.Type, v reflect.Value) {
		lastDocumented := ""
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := strings.Split(sf.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			key := prefix + tag
			ft := sf.Type
			var fv reflect.Value
			if v.IsValid() {
				fv = v.Field(i)
			}
			doc := docs[t.Name()+"."+sf.Name]
			if doc == sameAsAbove {
				doc = "See `" + lastDocumented + "`."
			} else if doc != "" {
				lastDocumented = key
			}
			switch {
			case ft == reflect.TypeFor[scheduler.Params]():
				rows = append(rows, row{key, "map", "the policy's (below)", doc})
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]():
				if doc != "" {
					rows = append(rows, row{key, "section", "", doc})
				}
				walk(key+".", ft, fv)
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
				rows = append(rows, row{key, "section (optional)", "", doc})
				var ev reflect.Value
				if ft.Elem() == reflect.TypeFor[XDS]() {
					ev = reflect.ValueOf(xdsDefaults)
				}
				walk(key+".", ft.Elem(), ev)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				rows = append(rows, row{key, "list", "", doc})
				var ev reflect.Value
				if fv.IsValid() && fv.Len() > 0 && ft.Elem() == reflect.TypeFor[Pool]() {
					ev = fv.Index(0)
				}
				walk(key+"[].", ft.Elem(), ev)
			default:
				rows = append(rows, row{key, typeName(ft), defaultOf(key, fv), doc})
			}
		}
	}
	walk("", reflect.TypeFor[Config](), reflect.ValueOf(d))

	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated from internal/config by TestConfigReference; do not edit.
     Refresh: go test ./internal/config -run TestConfigReference -update -->

dualmap reads one YAML file (` + "`dualmap serve --config FILE`" + `). Unknown keys
and values of the wrong type are errors that name the key; ` + "`dualmap config\ncheck FILE`" + ` checks a file without starting the router, and ` + "`dualmap config\ndefaults`" + ` prints every default as a file. A key left out (or zero) takes
its default. Durations are Go durations (` + "`500ms`, `5s`, `1m`" + `).

Environment overrides, applied after the file: ` + "`DUALMAP_LISTEN_GRPC`" + `,
` + "`DUALMAP_LISTEN_ADMIN`, `DUALMAP_LOG_LEVEL`, `DUALMAP_STATE_BACKEND`" + `; secrets
come from the variables or files the keys below name, never from the file
itself; tracing also follows the standard ` + "`OTEL_*`" + ` variables.

| key | type | default | description |
|---|---|---|---|
`)
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.key, r.typ, r.def, r.doc)
	}
	b.WriteString("\n## Policies and their parameters\n\n`pools[].policy.name` picks the scheduling policy; `pools[].policy.params` sets its parameters (unknown keys are errors). Each policy's parameters at their defaults:\n")
	for _, name := range scheduler.Policies() {
		p, err := scheduler.PolicyDefaults(name)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "\n### %s\n\n", name)
		if len(keys) == 0 {
			b.WriteString("No parameters.\n")
			continue
		}
		b.WriteString("| param | default |\n|---|---|\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "| `%s` | `%v` |\n", k, p[k])
		}
	}
	def, err := DefaultsYAML()
	if err != nil {
		return nil, err
	}
	b.WriteString("\n## Every default as a file\n\nThe output of `dualmap config defaults` (the pool is an example: pools have no default).\n\n```yaml\n")
	b.Write(def)
	b.WriteString("```\n")
	return b.Bytes(), nil
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration"
	case t.Kind() == reflect.Map:
		return fmt.Sprintf("map of %s", typeName(t.Elem()))
	case t.Kind() == reflect.Slice:
		return fmt.Sprintf("list of %s", typeName(t.Elem()))
	case t.Kind() == reflect.Int:
		return "int"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.Pointer:
		return typeName(t.Elem()) // a scalar whose unset value has a default
	}
	return t.Kind().String()
}

func defaultOf(key string, v reflect.Value) string {
	if !v.IsValid() || v.IsZero() {
		return ""
	}
	if key == "pools[].instances" {
		return ""
	}
	out, err := yaml.MarshalWithOptions(v.Interface(), yaml.Flow(true))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(out))
	if strings.Contains(s, "\n") {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}
