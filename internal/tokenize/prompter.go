package tokenize

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dualmap/dualmap/internal/chattmpl"
)

// Defaults for the zero fields of Config.
const (
	DefaultBlockSize    = 16 // vLLM's default KV-cache block size
	DefaultCacheEntries = 8192
	DefaultCacheTokens  = 8 << 20
)

// maxScratch bounds, in tokens, the buffers a Prompter keeps for reuse.
const maxScratch = 1 << 20

// Config sets up a Prompter. The zero value gives the defaults.
type Config struct {
	BlockSize    int // tokens per block; 0 means DefaultBlockSize; negative is an error
	CacheEntries int // per-message cache entries; 0 means DefaultCacheEntries; negative disables the cache
	CacheTokens  int // bound on the tokens the cache holds; 0 means DefaultCacheTokens; negative is an error
	// Template is the model's chat template (see "Chat rendering"); nil
	// means the builtin rendering.
	Template *chattmpl.Template
}

// Message is one chat message, its content already flattened to text by
// the caller.
//
// Content follows package openai's flattening (openai.Message): an
// assistant's tool calls and a tool message's tool_call_id are on lines of
// their own at the end ("<tool_calls>" and the JSON array, "<tool_call_id>"
// and the id), and a message with Role RoleTools carries the request's
// tools, its Content up to the first newline being their JSON array. A chat
// template gets these as the message's tool_calls and tool_call_id and as
// its tools variable; the builtin rendering renders Content as it is.
type Message struct {
	Role, Content string
}

// RoleTools is the role of the message that carries a request's tools (as
// openai.RoleTools).
const RoleTools = "tools"

// Prompt is what the scheduler needs of a prompt.
type Prompt struct {
	Tokens int      // prompt length in tokens
	Blocks []uint64 // chained block hashes (see Blocks): ceil(Tokens/BlockSize) values, none when Tokens is 0
}

// Prompter tokenizes prompts, caching each chat message's tokens so that a
// multi-turn chat only tokenizes what is new. It is safe for concurrent use
// and must not be copied. It does not own its Encoder: close that after the
// Prompter's last use.
type Prompter struct {
	enc       Encoder
	blockSize int
	markers   map[string][]uint32 // role -> marker tokens, read-only after NewPrompter
	gen       []uint32            // the generation prompt: the assistant's marker
	tmpl      *chattmpl.Template
	keys      keyer
	cache     *lru
	scratch   sync.Pool // *[]uint32 token buffers
}

// NewPrompter returns a Prompter that encodes with enc; cfg's zero fields
// take the defaults. It encodes the common roles' markers right away.
func NewPrompter(enc Encoder, cfg Config) (*Prompter, error) {
	if enc == nil {
		return nil, errors.New("tokenize: NewPrompter: nil Encoder")
	}
	if cfg.BlockSize < 0 {
		return nil, fmt.Errorf("tokenize: NewPrompter: negative BlockSize %d", cfg.BlockSize)
	}
	if cfg.CacheTokens < 0 {
		return nil, fmt.Errorf("tokenize: NewPrompter: negative CacheTokens %d", cfg.CacheTokens)
	}
	cfg.BlockSize = or(cfg.BlockSize, DefaultBlockSize)
	cfg.CacheEntries = or(cfg.CacheEntries, DefaultCacheEntries)
	cfg.CacheTokens = or(cfg.CacheTokens, DefaultCacheTokens)

	p := &Prompter{
		enc:       enc,
		blockSize: cfg.BlockSize,
		tmpl:      cfg.Template,
		markers:   make(map[string][]uint32),
		keys:      newKeyer(),
		cache:     newLRU(cfg.CacheEntries, cfg.CacheTokens),
	}
	for _, role := range commonRoles() {
		p.markers[role] = enc.Encode(roleMarker(role), nil)
	}
	p.gen = p.markers[generationRole]
	return p, nil
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Messages sets *dst to the prompt of a chat (see "Chat rendering" in the
// package doc): with a chat template, the template's rendering with the
// generation prompt, encoded piece by piece, each piece's tokens from the
// cache when there; without one, each message rendered as its role marker
// and content, then the assistant's marker, each message's tokens from the
// cache when there. No messages give Tokens 0 and no blocks. It reuses
// dst.Blocks' storage. It fails when dst is nil, and when the template
// cannot render the chat (the error wraps chattmpl.ErrRender).
func (p *Prompter) Messages(msgs []Message, dst *Prompt) error {
	return p.Chat(msgs, ChatOptions{}, dst)
}

// ChatOptions are a chat request's controls of its rendering (vLLM's
// add_generation_prompt, continue_final_message, chat_template_kwargs); the
// zero value is an ordinary chat completion.
type ChatOptions struct {
	// NoGenerationPrompt leaves the assistant's header (the builtin
	// rendering's final marker) off the end.
	NoGenerationPrompt bool
	// ContinueFinalMessage ends the prompt inside the last message, for the
	// model to continue it; with a template it needs NoGenerationPrompt, as
	// vLLM requires. The builtin rendering then ends with that message.
	ContinueFinalMessage bool
	// TemplateKwargs are extra template variables, a JSON object; "" for
	// none. The builtin rendering ignores them.
	TemplateKwargs string
}

// Chat is Messages with the request's rendering controls.
func (p *Prompter) Chat(msgs []Message, opt ChatOptions, dst *Prompt) error {
	if dst == nil {
		return errors.New("tokenize: Messages: nil *Prompt")
	}
	if p.tmpl != nil && len(msgs) > 0 {
		return p.templated(msgs, opt, dst)
	}
	c := newChain(p.blockSize, dst.Blocks[:0])
	total := 0
	if len(msgs) > 0 {
		buf := p.getScratch()
		for i := range msgs {
			m := &msgs[i]
			k := p.keys.key(m.Role, m.Content)
			toks, ok := p.cache.get(k)
			if !ok {
				*buf = p.encodeMessage(m.Role, m.Content, (*buf)[:0])
				toks = *buf
				p.cache.add(k, toks)
			}
			c.write(toks)
			total += len(toks)
		}
		p.putScratch(buf)
		if !opt.NoGenerationPrompt && !opt.ContinueFinalMessage {
			c.write(p.gen)
			total += len(p.gen)
		}
	}
	dst.Tokens = total
	dst.Blocks = c.finish()
	return nil
}

// encodeMessage appends a message's tokens, marker then content, to dst.
func (p *Prompter) encodeMessage(role, content string, dst []uint32) []uint32 {
	if m, ok := p.markers[role]; ok {
		dst = append(dst, m...)
	} else {
		dst = p.enc.Encode(roleMarker(role), dst)
	}
	return p.enc.Encode(content, dst)
}

// Text sets *dst to the prompt of a plain completion: text's tokens, with no
// role markers. Text is tokenized whole, without the cache: a tokenizer may
// merge tokens across any boundary one would cut text at, so tokens of
// pieces are not in general the tokens of the whole. It reuses dst.Blocks'
// storage; it fails only when dst is nil.
func (p *Prompter) Text(text string, dst *Prompt) error {
	if dst == nil {
		return errors.New("tokenize: Text: nil *Prompt")
	}
	buf := p.getScratch()
	*buf = p.enc.Encode(text, (*buf)[:0])
	dst.Tokens = len(*buf)
	dst.Blocks = Blocks(*buf, p.blockSize, dst.Blocks)
	p.putScratch(buf)
	return nil
}

// Stats returns the per-message cache's counters.
func (p *Prompter) Stats() CacheStats { return p.cache.snapshot() }

// BlockSize returns the tokens per block of the Prompter's Blocks.
func (p *Prompter) BlockSize() int { return p.blockSize }

// Encoder returns the Prompter's encoder.
func (p *Prompter) Encoder() Encoder { return p.enc }

func (p *Prompter) getScratch() *[]uint32 {
	if b, ok := p.scratch.Get().(*[]uint32); ok {
		return b
	}
	return new([]uint32)
}

func (p *Prompter) putScratch(b *[]uint32) {
	if cap(*b) <= maxScratch {
		p.scratch.Put(b)
	}
}
