// Package chattmpl renders a chat through the model's own chat template, the
// Jinja template in its tokenizer_config.json (or chat_template.jinja), the
// way vLLM and SGLang do before they tokenize a chat request.
//
// Engines render with transformers' apply_chat_template: a sandboxed Jinja
// environment with trim_blocks and lstrip_blocks on, loop controls, a tojson
// that keeps non-ASCII text, and the globals raise_exception, strftime_now
// and namespace; the template sees messages, tools, add_generation_prompt
// and the tokenizer's special tokens (bos_token, eos_token, ...). This
// package compiles templates with github.com/ardanlabs/jinja, a pure-Go
// Jinja implementation written for chat templates, and renders with the same
// variables; its tests compare the output with transformers' renderer over
// llama.cpp's collection of real templates.
//
// Source resolves where a pool's template comes from (see Resolve): the
// model's files beside its tokenizer.json, a file named in the config, or
// none, in which case the router keeps its own approximate rendering
// (package tokenize). ParseTokenizerConfig reads the fields of a
// tokenizer_config.json that matter here, with every size bounded.
//
// A Template is safe for concurrent use. Rendering allocates; it does no
// I/O and starts no goroutines.
package chattmpl
