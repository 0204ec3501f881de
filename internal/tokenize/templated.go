package tokenize

import (
	"strings"

	"github.com/dualmap/dualmap/internal/chattmpl"
)

// pieceRole is the cache-key role of a piece of a template's rendering; it
// cannot be a message's role, so pieces and builtin messages never share
// a key.
const pieceRole = "\x00piece"

// templated renders msgs with the chat template and encodes the text piece
// by piece (see "Chat rendering" in the package doc).
func (p *Prompter) templated(msgs []Message, opt ChatOptions, dst *Prompt) error {
	chat := chattmpl.Chat{
		AddGenerationPrompt:  !opt.NoGenerationPrompt,
		ContinueFinalMessage: opt.ContinueFinalMessage,
		Kwargs:               opt.TemplateKwargs,
		Messages:             make([]chattmpl.Message, 0, len(msgs)),
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Role == RoleTools && chat.Tools == "" && len(chat.Messages) == 0 {
			chat.Tools, _, _ = strings.Cut(m.Content, "\n")
			continue
		}
		chat.Messages = append(chat.Messages, unflatten(m))
	}
	text, err := p.tmpl.Render(&chat)
	if err != nil {
		return err
	}
	var cutBuf [64]int
	cuts := p.tmpl.Cuts(text, chat.Messages, cutBuf[:0])
	c := newChain(p.blockSize, dst.Blocks[:0])
	total := 0
	buf := p.getScratch()
	start := 0
	for i := 0; i <= len(cuts); i++ {
		end := len(text)
		if i < len(cuts) {
			end = cuts[i]
		}
		piece := text[start:end]
		start = end
		k := p.keys.key(pieceRole, piece)
		toks, ok := p.cache.get(k)
		if !ok {
			*buf = p.enc.Encode(piece, (*buf)[:0])
			toks = *buf
			p.cache.add(k, toks)
		}
		c.write(toks)
		total += len(toks)
	}
	p.putScratch(buf)
	dst.Tokens = total
	dst.Blocks = c.finish()
	return nil
}

// The tags of the lines package openai appends to a message's content.
const (
	tagToolCalls  = "<tool_calls>"
	tagToolCallID = "<tool_call_id>"
)

// unflatten splits the tool-call lines off a message's content (see
// Message): a tool message's last "<tool_call_id>" line, then an assistant's
// last "<tool_calls>" line holding a JSON array.
func unflatten(m *Message) chattmpl.Message {
	out := chattmpl.Message{Role: m.Role, Content: m.Content}
	switch m.Role {
	case "tool":
		if text, id, ok := cutLastLine(out.Content, tagToolCallID); ok {
			out.Content, out.ToolCallID = text, id
		}
	case "assistant":
		if text, calls, ok := cutLastLine(out.Content, tagToolCalls); ok && strings.HasPrefix(calls, "[") && !strings.Contains(calls, "\n") {
			out.Content, out.ToolCalls = text, calls
		}
	}
	return out
}

// cutLastLine splits s at its last line when that starts with tag: the text
// before that line (without the newline) and the rest of the line after the
// tag.
func cutLastLine(s, tag string) (before, value string, ok bool) {
	i := strings.LastIndexByte(s, '\n') + 1 // the last line's start
	if !strings.HasPrefix(s[i:], tag) {
		return s, "", false
	}
	return s[:max(0, i-1)], s[i+len(tag):], true
}
