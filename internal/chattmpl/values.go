package chattmpl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"
)

// maxDepth bounds the nesting of the JSON values turned into template
// values (tools, tool calls).
const maxDepth = 64

// jsonValue turns one JSON document into a template value, keeping object
// keys in document order (tojson then prints them as the engine got them),
// integers as ints and other numbers as floats.
func jsonValue(doc string) (jinja.Value, error) {
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxDepth {
		return jinja.Undefined(), fmt.Errorf("JSON nested deeper than %d", maxDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			var items []jinja.Value
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			if _, err := d.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewList(items), nil
		case '{':
			obj := jinja.NewDict()
			dict := obj.AsDict()
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				k, _ := kt.(string)
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				dict.Set(k, v)
			}
			if _, err := d.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return obj, nil
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", t)
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return jinja.NewInt(i), nil
		}
		f, err := t.Float64()
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("number %s: %w", t, err)
		}
		return jinja.NewFloat(f), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

// toolCallsValue reads an assistant's tool_calls array. As vLLM does before
// rendering, each call's function.arguments given as a string holding a JSON
// object becomes that object, so templates can iterate over it.
func toolCallsValue(doc string) (jinja.Value, error) {
	v, err := jsonValue(doc)
	if err != nil {
		return v, err
	}
	if !v.IsList() {
		return jinja.Undefined(), errors.New("want an array")
	}
	for _, call := range v.AsList().Items {
		if !call.IsDict() {
			continue
		}
		fn, ok := call.AsDict().Get("function")
		if !ok || !fn.IsDict() {
			continue
		}
		args, ok := fn.AsDict().Get("arguments")
		if !ok || !args.IsString() {
			continue
		}
		s := strings.TrimSpace(args.AsString())
		if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
			continue
		}
		if obj, err := jsonValue(s); err == nil {
			fn.AsDict().Set("arguments", obj)
		}
	}
	return v, nil
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
