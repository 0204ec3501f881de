package openai

// RoleTools is the Role of the synthetic message that carries a request's
// tool definitions (see Request.Messages).
const RoleTools = "tools"

// Message is one message of the prompt, with its content flattened to text.
type Message struct {
	// Role is the message's role ("system", "user", ...); for the synthetic
	// tools message it is RoleTools, and for a Responses API item that is not
	// a message it is the item's type ("function_call", "reasoning", ...).
	Role string
	// Content is the message as text. Text parts are joined with "\n"; other
	// parts become markers like <image_url:0123456789abcdef> holding the
	// 64-bit FNV-1a hash of the part's canonical JSON, so equal images match
	// and different ones differ. An assistant's tool calls and a tool
	// message's tool_call_id are appended on lines of their own, as
	// "<tool_calls>" followed by the canonical JSON of the array and
	// "<tool_call_id>" followed by the id.
	Content string
}

// Request is what the router needs from an inference request.
type Request struct {
	// Kind is the request's kind; for KindOther no other field is set.
	Kind Kind
	// Model is the model name; never empty for a parsed inference request.
	Model string
	// Stream is the request's "stream" flag.
	Stream bool
	// Messages is the prompt of a chat or Responses API request, in order,
	// never empty for those kinds. When the request defines tools, the first
	// message is a synthetic one with Role RoleTools and Content the
	// canonical JSON of the tools array, followed by a line
	// "<tool_choice>" and the canonical JSON of tool_choice when that is set.
	// For the Responses API an "instructions" string comes next as a
	// "system" message, then the input items.
	Messages []Message
	// Prompts are the prompts of a completions request, never empty for that
	// kind; the router hashes the first. A prompt given as token ids is
	// represented as the ids in decimal joined by single spaces ("1 2 3"),
	// and is hashed like text.
	Prompts []string
	// MaxTokens is the output-token budget: max_completion_tokens, else
	// max_tokens (chat), max_tokens (completions) or max_output_tokens
	// (responses); 0 when absent or null.
	MaxTokens int
	// User is the "user" field, empty when absent; a possible session key.
	User string
	// The chat template controls of a chat request (vLLM's extensions):
	// NoGenerationPrompt is "add_generation_prompt": false (the default,
	// true, ends the rendering with the assistant's header),
	// ContinueFinalMessage is "continue_final_message": true (the rendering
	// ends inside the last message, for the model to continue it), and
	// TemplateKwargs is "chat_template_kwargs", the canonical JSON of an
	// object of extra template variables (e.g. {"enable_thinking":false}),
	// "" when absent.
	NoGenerationPrompt, ContinueFinalMessage bool
	TemplateKwargs                           string
}

// Limits bounds what Parse accepts.
type Limits struct {
	// MaxBodyBytes is the largest body accepted; 0 means no limit here.
	MaxBodyBytes int
}
