package chattmpl

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// MaxRenderedBytes bounds one rendered chat; a longer one is a render error.
const MaxRenderedBytes = 64 << 20

// ErrRender wraps every error of Template.Render: the chat could not be
// rendered (the template raised an exception, or failed on its input).
var ErrRender = errors.New("chat template")

// Message is one chat message as the template sees it.
type Message struct {
	Role    string
	Content string // text; the template sees "" for none
	// ToolCalls is an assistant's tool_calls, a JSON array; "" for none.
	ToolCalls string
	// ToolCallID is a tool message's tool_call_id; "" for none.
	ToolCallID string
}

// Chat is what one chat request gives the template.
type Chat struct {
	Messages []Message
	// Tools is the request's tools, a JSON array; "" for none.
	Tools string
	// AddGenerationPrompt ends the rendering with the assistant's header,
	// as engines do for a chat completion.
	AddGenerationPrompt bool
	// ContinueFinalMessage ends the rendering inside the last message,
	// right after its content, for the model to continue it (an assistant
	// prefill); it cannot go with AddGenerationPrompt.
	ContinueFinalMessage bool
	// Kwargs are extra template variables (a request's
	// chat_template_kwargs), a JSON object; "" for none. They cannot
	// replace the variables above or the special tokens.
	Kwargs string
}

// continueTag marks the end of the final message's content while
// rendering with ContinueFinalMessage; the rendering is cut at its last
// occurrence. It is transformers' marker, so that templates that look at
// the content see the same text.
const continueTag = "CONTINUE_FINAL_MESSAGE_TAG "

// Options set up Compile.
type Options struct {
	// Special are the special-token variables the template sees
	// (TokenizerConfig.Special).
	Special map[string]string
	// Added are the tokenizer's added tokens. Those its tokenizer splits the
	// text at before anything else (not normalized, not stripping space to
	// their left, not single-word) are where Render may cut the text into
	// pieces that encode separately to the tokens of the whole.
	Added []AddedToken
}

// Template is a compiled chat template, or a set of named ones.
type Template struct {
	def, toolUse *jinja.Template // toolUse nil: def serves requests with tools too
	vars         map[string]jinja.Value
	cuts         cutter
}

// Compile compiles a single chat template. A template that does not parse
// is an error naming where.
func Compile(src string, opt Options) (*Template, error) {
	return CompileNamed(map[string]string{"default": src}, opt)
}

// CompileNamed compiles a model's named chat templates (as in a
// tokenizer_config.json with a list of templates): a request with tools
// gets "tool_use" when there is one, and every other request "default",
// as transformers chooses; a set of more than one without "default" is an
// error, as there.
func CompileNamed(templates map[string]string, opt Options) (*Template, error) {
	src, ok := templates["default"]
	if !ok {
		if len(templates) != 1 {
			names := make([]string, 0, len(templates))
			for n := range templates {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("chat template: %d named templates (%s) and none named \"default\"", len(names), strings.Join(names, ", "))
		}
		for _, s := range templates {
			src = s
		}
	}
	t := &Template{vars: map[string]jinja.Value{}, cuts: newCutter(opt.Added)}
	var err error
	if t.def, err = compileOne(src); err != nil {
		return nil, err
	}
	if tu, ok := templates["tool_use"]; ok && len(templates) > 1 {
		if t.toolUse, err = compileOne(tu); err != nil {
			return nil, fmt.Errorf("tool_use: %w", err)
		}
	}
	for k, v := range opt.Special {
		t.vars[k] = jinja.NewString(v)
	}
	return t, nil
}

func compileOne(src string) (_ *jinja.Template, err error) {
	if len(src) > MaxTemplateBytes {
		return nil, fmt.Errorf("chat template: %d bytes, more than the %d accepted", len(src), MaxTemplateBytes)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chat template: the parser failed: %v", r)
		}
	}()
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return t, nil
}

// Render renders c. Every error wraps ErrRender; a template that raised an
// exception (raise_exception, e.g. "roles must alternate") says so in it.
func (t *Template) Render(c *Chat) (string, error) {
	data, err := t.data(c)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrRender, err)
	}
	tmpl := t.def
	if c.Tools != "" && t.toolUse != nil {
		tmpl = t.toolUse
	}
	out, err := renderSafe(tmpl, data)
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrRender, firstLine(err.Error()))
	}
	if c.ContinueFinalMessage {
		if out, err = cutAtContinueTag(out, c.Messages[len(c.Messages)-1].Content); err != nil {
			return "", fmt.Errorf("%w: %v", ErrRender, err)
		}
	}
	if len(out) > MaxRenderedBytes {
		return "", fmt.Errorf("%w: rendered %d bytes, more than the %d accepted", ErrRender, len(out), MaxRenderedBytes)
	}
	return out, nil
}

// renderSafe renders, turning a panic of the template engine into an error:
// one request's input must not take the router down.
func renderSafe(t *jinja.Template, data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("the template engine failed: %v", r)
		}
	}()
	return t.RenderValues(data)
}

// cutAtContinueTag ends out where the final message's content ends, at the
// last continueTag: right before it when the template kept the content's
// spacing, else before the spacing the template's trimming left.
func cutAtContinueTag(out, final string) (string, error) {
	tag := strings.TrimSpace(continueTag)
	i := strings.LastIndex(out, tag)
	if i < 0 || !strings.Contains(out, strings.TrimSpace(final)) {
		return "", errors.New("continue_final_message: the template does not render the final message's content as it is")
	}
	if strings.HasPrefix(out[i:], continueTag) {
		return out[:i], nil
	}
	return strings.TrimRightFunc(out[:i], unicode.IsSpace), nil
}

// data builds the template's variables for c.
func (t *Template) data(c *Chat) (map[string]jinja.Value, error) {
	if c.ContinueFinalMessage {
		switch {
		case c.AddGenerationPrompt:
			return nil, errors.New("continue_final_message and add_generation_prompt cannot both be set")
		case len(c.Messages) == 0:
			return nil, errors.New("continue_final_message with no message to continue")
		}
	}
	data := make(map[string]jinja.Value, len(t.vars)+5)
	if c.Kwargs != "" {
		kw, err := jsonValue(c.Kwargs)
		if err != nil || !kw.IsDict() {
			return nil, errors.New("chat_template_kwargs: want a JSON object")
		}
		d := kw.AsDict()
		for _, k := range d.Keys {
			data[k], _ = d.Get(k)
		}
	}
	for k, v := range t.vars {
		data[k] = v
	}
	msgs := make([]jinja.Value, len(c.Messages))
	for i := range c.Messages {
		m := &c.Messages[i]
		v := jinja.NewDict()
		d := v.AsDict()
		d.Set("role", jinja.NewString(m.Role))
		content := m.Content
		if c.ContinueFinalMessage && i == len(c.Messages)-1 {
			content += continueTag
		}
		d.Set("content", jinja.NewString(content))
		if m.ToolCalls != "" {
			calls, err := toolCallsValue(m.ToolCalls)
			if err != nil {
				return nil, fmt.Errorf("messages[%d].tool_calls: %v", i, err)
			}
			d.Set("tool_calls", calls)
		}
		if m.ToolCallID != "" {
			d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		msgs[i] = v
	}
	data["messages"] = jinja.NewList(msgs)
	if c.Tools != "" {
		tools, err := jsonValue(c.Tools)
		if err != nil {
			return nil, fmt.Errorf("tools: %v", err)
		}
		if !tools.IsList() {
			return nil, errors.New("tools: want an array")
		}
		data["tools"] = tools
	} else {
		data["tools"] = jinja.None()
	}
	data["documents"] = jinja.None()
	data["add_generation_prompt"] = jinja.NewBool(c.AddGenerationPrompt)
	return data, nil
}
