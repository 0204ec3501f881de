package chattmpl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The comparison with an independent renderer: transformers'
// render_jinja_template (what vLLM and SGLang call) in the virtualenv that
// scripts/chattmpl.sh builds, over llama.cpp's real templates and many chat
// shapes. `make chattmpl-test` sets the two variables; without them the test
// skips and says so.
const (
	envPython    = "DUALMAP_CHATTMPL_PYTHON"
	envTemplates = "DUALMAP_CHATTMPL_TEMPLATES"
)

// Kinds of known difference.
const (
	// lenient: transformers refuses the chat (the engine answers 400) and we
	// render it; routing a request the engine will refuse is harmless.
	lenient = "lenient"
	// differs: both render, the texts differ.
	differs = "differs"
)

// knownDiffs are the templates on which this package is known to differ from
// transformers on some chats, the kind of difference and why. The test
// fails on a difference of another template or kind, and on a listed
// template that no longer shows its difference (the list must stay true).
var knownDiffs = map[string]struct{ kind, why string }{
	"CohereForAI-c4ai-command-r-plus-tool_use.jinja":      {lenient, "iterates tools when there are none: Python cannot iterate None, ardanlabs/jinja iterates nothing"},
	"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": {lenient, "iterates tools when there are none (as above)"},
	"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja":   {lenient, "iterates tools when there are none (as above)"},
	"fireworks-ai-llama-3-firefunction-v2.jinja":          {lenient, "reads a variable `functions` that nothing defines: an error in Python's strict use, empty here"},
	"Kimi-K2-Instruct.jinja":                              {lenient, "calls list.append, which transformers' sandbox forbids"},
	"Kimi-K2-Thinking.jinja":                              {lenient, "calls list.append, which transformers' sandbox forbids"},
	"llama-cpp-deepseek-r1.jinja":                         {lenient, "applies tojson to a generator, which Python cannot serialise"},
	"meetkai-functionary-medium-v3.2.jinja":               {lenient, "adds a string and a dict, a TypeError in Python"},
	"meetkai-functionary-medium-v3.1.jinja":               {differs, "adds a |safe string to tojson's output: MarkupSafe then HTML-escapes the JSON in Python"},
	"meta-llama-Llama-3.1-8B-Instruct.jinja":              {differs, "tojson(indent=4) in ardanlabs/jinja v1.8.0 (and v1.11.0) escapes <, > and & as \\u003c etc."},
	"meta-llama-Llama-3.2-3B-Instruct.jinja":              {differs, "tojson(indent=4) escapes <, > and & (as above)"},
	"meta-llama-Llama-3.3-70B-Instruct.jinja":             {differs, "tojson(indent=4) escapes <, > and & (as above)"},
	"ibm-granite-granite-3.3-2B-Instruct.jinja":           {differs, "tojson(indent=4) escapes <, > and & (as above)"},
	"Reka-Edge.jinja":                                     {differs, "tojson(ensure_ascii=True): ardanlabs/jinja v1.8.0 ignores ensure_ascii and keeps non-ASCII text as it is"},
}

// chatCase is one chat shape, given to both renderers.
type chatCase struct {
	name string
	chat Chat
}

// weatherTools is in the router's canonical form (keys sorted, as package
// openai passes tools on); the engine sees the request's own key order.
const weatherTools = `[{"function":{"description":"Current weather for a city (a < b & c).","name":"get_weather","parameters":{"properties":{"city":{"description":"City name","type":"string"},"unit":{"enum":["c","f"],"type":"string"}},"required":["city"],"type":"object"}},"type":"function"}]`

const weatherCall = `[{"function":{"arguments":"{\"city\": \"Paris\", \"unit\": \"c\"}","name":"get_weather"},"id":"call_1","type":"function"}]`

func chatCases() []chatCase {
	u := func(s string) Message { return Message{Role: "user", Content: s} }
	a := func(s string) Message { return Message{Role: "assistant", Content: s} }
	sys := func(s string) Message { return Message{Role: "system", Content: s} }
	long := []Message{sys("You are terse.")}
	for i := range 6 {
		long = append(long, u(fmt.Sprintf("Question %d: what is %d squared?", i, i)), a(fmt.Sprintf("%d.", i*i)))
	}
	long = append(long, u("And 7?"))
	cases := []chatCase{
		{name: "user", chat: Chat{Messages: []Message{u("Hello!")}}},
		{name: "system+user", chat: Chat{Messages: []Message{sys("You are a helpful assistant."), u("What is the capital of France?")}}},
		{name: "multi-turn", chat: Chat{Messages: []Message{sys("You are a helpful assistant."), u("Hi"), a("Hello! How can I help?"), u("Tell me a joke.")}}},
		{name: "long multi-turn", chat: Chat{Messages: long}},
		{name: "no system multi-turn", chat: Chat{Messages: []Message{u("one"), a("two"), u("three")}}},
		{name: "empty content", chat: Chat{Messages: []Message{u("")}}},
		{name: "empty assistant", chat: Chat{Messages: []Message{u("hi"), a(""), u("again")}}},
		{name: "unicode", chat: Chat{Messages: []Message{sys("Réponds en français. 日本語も。"), u("Ça va? 🙂 مرحبا — naïve café\u0301 \u00a0tab\there")}}},
		{name: "template-like text", chat: Chat{Messages: []Message{u("{{ messages }} {% if x %}<|im_end|></s>[INST]")}}},
		{name: "whitespace", chat: Chat{Messages: []Message{sys("  padded  \n"), u("\n\nlines\n\n")}}},
		{name: "assistant prefill", chat: Chat{Messages: []Message{u("Write a haiku."), a("Autumn moon")}}},
		{name: "tools", chat: Chat{Messages: []Message{u("Weather in Paris?")}, Tools: weatherTools}},
		{name: "unicode tool call", chat: Chat{Tools: weatherTools, Messages: []Message{
			u("Wetter in Zürich? 天气"),
			{Role: "assistant", ToolCalls: zurichCall},
			{Role: "tool", Content: `{"temp": "18 °C"}`, ToolCallID: "call_2"},
		}}},
		{name: "tool call round trip", chat: Chat{Tools: weatherTools, Messages: []Message{
			u("Weather in Paris?"),
			{Role: "assistant", ToolCalls: weatherCall},
			{Role: "tool", Content: `{"temp": 18, "sky": "clear"}`, ToolCallID: "call_1"},
		}}},
	}
	for i := range cases {
		cases[i].chat.AddGenerationPrompt = true
	}
	cases = append(cases,
		chatCase{name: "no generation prompt", chat: Chat{Messages: []Message{sys("S"), u("Q"), a("A")}}},
		chatCase{name: "prefill without generation prompt", chat: Chat{Messages: []Message{u("Count: "), a("1, 2,")}}},
		chatCase{name: "continue final message", chat: Chat{Messages: []Message{sys("S"), u("Write a haiku."), a("Autumn moon ")}, ContinueFinalMessage: true}},
		chatCase{name: "template kwargs", chat: Chat{Messages: []Message{u("Think?"), a("No."), u("Sure?")}, AddGenerationPrompt: true,
			Kwargs: `{"enable_thinking":false,"reasoning_effort":"low"}`}},
	)
	return cases
}

const zurichCall = `[{"function":{"arguments":"{\"city\": \"Zürich\"}","name":"get_weather"},"id":"call_2","type":"function"}]`

const zurichCallPy = `[{"function":{"arguments":{"city": "Zürich"},"name":"get_weather"},"id":"call_2","type":"function"}]`

// weatherCallPy is weatherCall as vLLM hands it to the template: the
// arguments string parsed into an object, key order kept.
const weatherCallPy = `[{"function":{"arguments":{"city": "Paris", "unit": "c"},"name":"get_weather"},"id":"call_1","type":"function"}]`

// pyMessages is what Python gets for msgs, as raw JSON so that key order
// is kept as written.
func pyMessages(t *testing.T, msgs []Message) []any {
	out := make([]any, len(msgs))
	for i, m := range msgs {
		pm := map[string]any{"role": m.Role, "content": m.Content}
		switch m.ToolCalls {
		case "":
		case weatherCall:
			pm["tool_calls"] = json.RawMessage(weatherCallPy)
		case zurichCall:
			pm["tool_calls"] = json.RawMessage(zurichCallPy)
		default:
			t.Fatalf("no Python form for tool calls %s", m.ToolCalls)
		}
		if m.ToolCallID != "" {
			pm["tool_call_id"] = m.ToolCallID
		}
		out[i] = pm
	}
	return out
}

var testSpecial = map[string]string{"bos_token": "<|bos|>", "eos_token": "<|eos|>"}

func TestMatchesTransformers(t *testing.T) {
	py, dir := os.Getenv(envPython), os.Getenv(envTemplates)
	if py == "" || dir == "" {
		t.Skipf("skipping: %s and %s are unset; `make chattmpl-test` builds transformers' renderer (scripts/chattmpl.sh) and sets them", envPython, envTemplates)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(files) < 20 {
		t.Fatalf("want at least 20 templates in %s, found %d (%v)", dir, len(files), err)
	}
	cases := chatCases()
	type job struct{ file, chat string }
	var jobs []job
	var pyCases []map[string]any
	sources := map[string]string{}
	special := map[string]map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources[f], special[f] = string(src), testSpecial
	}
	// Real tokenizer_config.json files too (from the tokenizers module's
	// test data), through ParseTokenizerConfig, with their special tokens.
	for _, f := range moduleConfigs(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseTokenizerConfig(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if src, ok := cfg.Templates["default"]; ok {
			files = append(files, f)
			sources[f], special[f] = src, cfg.Special
		}
	}
	for _, f := range files {
		for _, c := range cases {
			vars := map[string]any{}
			if c.chat.Kwargs != "" {
				if err := json.Unmarshal([]byte(c.chat.Kwargs), &vars); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range special[f] {
				vars[k] = v
			}
			pc := map[string]any{
				"template": sources[f], "messages": pyMessages(t, c.chat.Messages),
				"add_generation_prompt": c.chat.AddGenerationPrompt, "continue_final_message": c.chat.ContinueFinalMessage,
				"vars": vars,
			}
			if c.chat.Tools != "" {
				pc["tools"] = json.RawMessage(c.chat.Tools)
			}
			pyCases = append(pyCases, pc)
			jobs = append(jobs, job{f, c.name})
		}
	}
	in, err := json.Marshal(map[string]any{"cases": pyCases})
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../scripts/chattmpl_render.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, stderr.String())
	}
	var res struct {
		Results []struct {
			Text  *string `json:"text"`
			Error string  `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Results) != len(jobs) {
		t.Fatalf("renderer output: %v, %d results for %d cases", err, len(res.Results), len(jobs))
	}

	compiled := map[string]*Template{}
	var same, bothErr, known, diffs int
	perFile := map[string]int{}
	seenKnown := map[string]bool{}
	for i, j := range jobs {
		name := filepath.Base(j.file)
		if name == "tokenizer_config.json" {
			name = filepath.Base(filepath.Dir(j.file)) + "/" + name
		}
		tmpl, ok := compiled[j.file]
		if !ok {
			tmpl, err = Compile(sources[j.file], Options{Special: special[j.file]})
			if err != nil {
				t.Errorf("%s: Compile() error = %v", name, err)
			}
			compiled[j.file] = tmpl
		}
		var c *Chat
		for k := range cases {
			if cases[k].name == j.chat {
				c = &cases[k].chat
			}
		}
		want := res.Results[i]
		var got string
		var gotErr error = fmt.Errorf("did not compile")
		if tmpl != nil {
			got, gotErr = tmpl.Render(c)
		}
		key := name + " / " + j.chat
		var problem, kind string
		switch {
		case want.Text == nil && gotErr != nil:
			bothErr++
			continue
		case want.Text == nil:
			kind = lenient
			problem = fmt.Sprintf("transformers refused (%s), we rendered %q", want.Error, clip(got))
		case gotErr != nil:
			kind = "refused"
			problem = fmt.Sprintf("we refused (%v), transformers rendered %q", gotErr, clip(*want.Text))
		case got != *want.Text:
			kind = differs
			problem = fmt.Sprintf("differs at byte %d:\n  transformers %q\n  ours         %q", firstDiff(got, *want.Text), around(*want.Text, firstDiff(got, *want.Text)), around(got, firstDiff(got, *want.Text)))
		default:
			same++
			continue
		}
		if k, ok := knownDiffs[name]; ok && k.kind == kind {
			seenKnown[name] = true
			known++
			continue
		}
		diffs++
		perFile[name]++
		if perFile[name] <= 2 {
			t.Errorf("%s: %s", key, problem)
		}
	}
	for name, k := range knownDiffs {
		if !seenKnown[name] {
			t.Errorf("%s is listed in knownDiffs (%s: %s) but shows no such difference now: remove it", name, k.kind, k.why)
		}
	}
	var names []string
	for n, k := range perFile {
		names = append(names, fmt.Sprintf("%s (%d)", n, k))
	}
	sort.Strings(names)
	t.Logf("%d templates x %d chats: %d identical, %d refused by both, %d known differences (%d templates), %d new differences %s",
		len(files), len(cases), same, bothErr, known, len(seenKnown), diffs, strings.Join(names, ", "))
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func around(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// moduleConfigs returns the tokenizer_config.json files in the test data of
// github.com/daulet/tokenizers (a dependency: in the module cache).
func moduleConfigs(t *testing.T) []string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "github.com/daulet/tokenizers@v1.22.1/test/data")
	files, _ := filepath.Glob(filepath.Join(dir, "*", "tokenizer_config.json"))
	if len(files) == 0 {
		t.Fatalf("no tokenizer_config.json under %s: run go mod download github.com/daulet/tokenizers", dir)
	}
	return files
}
