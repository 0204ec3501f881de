package openai

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReadString(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: `""`, want: ""},
		{in: `"plain text that is longer than eight bytes"`, want: "plain text that is longer than eight bytes"},
		{in: `"a\"b\\c\/d"`, want: `a"b\c/d`},
		{in: `"\b\f\n\r\t"`, want: "\b\f\n\r\t"},
		{in: `"\u0041\u00e9\u6771\uFFFF"`, want: "Aé東\uffff"},
		{in: `"\ud83d\ude00"`, want: "😀"},
		{in: `"\ud83d"`, want: "\ufffd"},
		{in: `"\ude00x"`, want: "\ufffdx"},
		{in: `"\ud83d\u0041"`, want: "\ufffdA"},
		{in: `"\ud83d\ud83d\ude00"`, want: "\ufffd😀"},
		{in: `"\ud83d\n"`, want: "\ufffd\n"},
		{in: `"é東😀"`, want: "é東😀"},
		{in: `"`, wantErr: true},
		{in: `"abc`, wantErr: true},
		{in: `"abc\"`, wantErr: true},
		{in: `"\`, wantErr: true},
		{in: `"\x"`, wantErr: true},
		{in: `"\u12"`, wantErr: true},
		{in: `"\u12g4"`, wantErr: true},
		{in: `"\ud83d\u12"`, wantErr: true},
		{in: "\"a\x01b\"", wantErr: true},
		{in: "\"a\tb\"", wantErr: true},
		{in: "\"a\x7fb\"", want: "a\x7fb"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			for _, mode := range []strMode{strView, strAppend, strSkip} {
				r := reader{data: []byte(tt.in)}
				got, err := r.readString([]byte("pre:"), mode)
				if tt.wantErr {
					if err == nil {
						t.Errorf("readString(%s, mode %d) = %q, nil, want an error", tt.in, mode, got)
					}
					continue
				}
				want := map[strMode]string{strView: tt.want, strAppend: "pre:" + tt.want, strSkip: ""}[mode]
				if err != nil || string(got) != want || r.pos != len(tt.in) {
					t.Errorf("readString(%s, mode %d) = %q, %v at %d, want %q, nil at %d", tt.in, mode, got, err, r.pos, want, len(tt.in))
				}
			}
		})
	}
}

// TestReadStringMatchesEncodingJSON compares the reader's strings with
// encoding/json's on random strings full of escapes.
func TestReadStringMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{`a`, `é`, `東`, `😀`, `\n`, `\"`, `\\`, `\/`, `\u0000`, `\u00e9`, `\ud83d`, `\ude00`, `\ud83d\ude00`, `\uDBFF\uDFFF`, ` `, "\x7f"}
	for i := 0; i < 2000; i++ {
		var b strings.Builder
		b.WriteByte('"')
		for n := rng.IntN(40); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteByte('"')
		in := b.String()
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("json.Unmarshal(%s) error = %v", in, err)
		}
		r := reader{data: []byte(in)}
		got, err := r.readString(nil, strView)
		if err != nil || string(got) != want {
			t.Fatalf("readString(%s) = %q, %v, want %q, nil", in, got, err, want)
		}
	}
}

func TestPlainRun(t *testing.T) {
	naive := func(b []byte) int {
		for i, c := range b {
			if c < 0x20 || c == '"' || c == '\\' {
				return i
			}
		}
		return len(b)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{'a', ' ', '"', '\\', 0x00, 0x1f, 0x20, 0x21, 0x7f, 0x80, 0xff, 0x5b, 0x5d, 0x22 ^ 0x80, 0x5c ^ 0x80, 0xa0}
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			if rng.IntN(6) == 0 {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[j] = byte(0x20 + rng.IntN(0xe0))
				if b[j] == '"' || b[j] == '\\' {
					b[j] = 'x'
				}
			}
		}
		if got, want := plainRun(b), naive(b); got != want {
			t.Fatalf("plainRun(%q) = %d, want %d", b, got, want)
		}
	}
}

func TestReadNumber(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "0", want: "0"},
		{in: "-0", want: "-0"},
		{in: "123", want: "123"},
		{in: "-1.25e-3", want: "-1.25e-3"},
		{in: "1E+2", want: "1E+2"},
		{in: "01", want: "0"}, // the caller rejects what follows
		{in: "1.5,", want: "1.5"},
		{in: "-", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "1.", wantErr: true},
		{in: ".5", wantErr: true},
		{in: "1e", wantErr: true},
		{in: "1e+", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r := reader{data: []byte(tt.in)}
			got, err := r.readNumber()
			if (err != nil) != tt.wantErr || string(got) != tt.want {
				t.Errorf("readNumber(%q) = %q, %v, want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestDocumentMatchesEncodingJSON checks the reader's notion of valid JSON
// against json.Valid.
func TestDocumentMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `{"a":[1,2,{"b":null}],"c":true,"d":false,"e":"x"}`, ` 1 `, `"s"`, `-0.0e0`,
		`{`, `}`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `[1 2]`, `nul`, `truee`, `[]]`,
		`{"a":1}{}`, `{} x`, `"\u00"`, "[\"\x00\"]", `[1e]`, `[01]`, `[-]`, `{"a":[}`, `[{]`, "\t[\n]\r ",
	}
	for _, d := range docs {
		t.Run(d, func(t *testing.T) {
			r := reader{data: []byte(d)}
			err := r.document()
			if want := json.Valid([]byte(d)); (err == nil) != want {
				t.Errorf("document(%q) = %v, want valid = %v", d, err, want)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	tests := []struct {
		name    string
		depth   int
		wantErr bool
	}{
		{"at the limit", maxDepth, false},
		{"over the limit", maxDepth + 1, true},
		{"far over the limit", 100 * maxDepth, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Alternate arrays and objects: [{"a":[{"a":...}]}]
			var open, close bytes.Buffer
			for i := 0; i < tt.depth; i++ {
				if i%2 == 0 {
					open.WriteString(`[`)
					close.WriteString(`]`)
				} else {
					open.WriteString(`{"a":`)
					close.WriteString(`}`)
				}
			}
			closing := close.Bytes()
			for i, j := 0, len(closing)-1; i < j; i, j = i+1, j-1 {
				closing[i], closing[j] = closing[j], closing[i]
			}
			doc := append(append(open.Bytes(), '0'), closing...)
			for _, read := range []func(*reader) error{
				(*reader).document,
				func(r *reader) error { _, err := r.canon(nil); return err },
			} {
				r := reader{data: doc}
				if err := read(&r); (err != nil) != tt.wantErr {
					t.Errorf("reading %d levels: error = %v, want error %v", tt.depth, err, tt.wantErr)
				}
			}
		})
	}
}

// TestParseLeavesBodyAlone checks that Parse neither changes the body nor
// returns strings that share its memory.
func TestParseLeavesBodyAlone(t *testing.T) {
	bodies := []struct{ path, body string }{
		{chatPath, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},"c"]}]}`},
		{chatPath, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b\nc"}]}]}`},
		{responsesPath, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`},
	}
	for _, b := range bodies {
		t.Run(b.body, func(t *testing.T) {
			body := []byte(b.body)
			req, _ := Parse("POST", b.path, "", body, Limits{})
			if string(body) != b.body {
				t.Fatalf("Parse() changed the body to %s", body)
			}
			if req == nil {
				return
			}
			for i := range body {
				body[i] = 'X'
			}
			for _, m := range req.Messages {
				if strings.Contains(m.Role+m.Content, "XX") || !utf8.ValidString(m.Content) {
					t.Errorf("Parse().Messages = %q share memory with the body", req.Messages)
				}
			}
		})
	}
}
