// Package tokenize turns an LLM request's prompt into what the router's
// scheduler needs: the prompt's length in tokens and the chained block hashes
// of its tokens.
//
// It is for estimating prefill work and prefix-cache overlap from the router:
// Prompter.Messages (chat) and Prompter.Text (completions) return a Prompt,
// and Blocks is the block hashing that the simulated model server must share
// with the router. With the model's tokenizer and its chat template (see Chat
// rendering) a chat's tokens are the engine's own; with the byte
// approximation or the builtin rendering they are an estimate. It starts no
// goroutines and does no I/O except reading a tokenizer file in Open.
//
// # Encoders
//
// Bytes is the zero-setup approximation: one token per 4 bytes of UTF-8 text,
// the token id being those 4 bytes read as a little-endian uint32 (the last
// one zero-padded). It is deterministic and, at roughly 4 characters per
// token, close to the 3.5-4.5 characters per token that BPE tokenizers give
// on English, so token counts, and the time-to-first-token estimates built
// on them, are in the right range. Open with a tokenizer.json path returns a
// real Hugging Face tokenizer, available only in a build with the
// "tokenizers" build tag (see Open).
//
// # Chat rendering
//
// Model servers render a chat through the model's own chat template before
// tokenizing it. With Config.Template (package chattmpl: the template of
// the model's tokenizer_config.json or chat_template.jinja, rendered as
// transformers' apply_chat_template renders for vLLM and SGLang, with the
// generation prompt) Prompter.Messages does the same: it renders the whole
// chat once, then encodes the text in pieces cut just before an added token
// (<|eot_id|>, <|im_end|>, ...) after each message's content. A Hugging Face
// tokenizer matches added tokens on the raw text before anything else and
// encodes the stretches between them one by one, so the pieces' tokens are
// exactly the whole text's, the engine's own (tested with Llama 3's template
// and tokenizer). Each piece's tokens are cached by the piece's text, so a
// turn that repeats the previous chat encodes only its new pieces: render
// once, encode once per changed message. A template whose markers are not
// added tokens gives no cut points, and its chats are encoded whole each
// time (exact, not cached). A template that fails on a chat (a role it
// refuses, raise_exception) fails Messages with an error wrapping
// chattmpl.ErrRender, which the router answers with a 400.
//
// Without a template the builtin rendering is used: not the engine's, only
// a deterministic one in which equal leading messages give equal leading
// tokens, and whose length is close. Prompter.Messages renders each message
// as the text "<|role|>\n" followed by its content, each encoded on its own,
// and ends the chat with "<|assistant|>\n", as a server does when it adds the
// generation prompt. A chat's tokens are then the concatenation of its
// messages' tokens, which lets Prompter cache them per message, and a turn's
// tokens are a prefix of the next turn's, which repeats the chat and adds
// the reply and a new message.
//
// # The message cache
//
// Prompter keeps each message's tokens (each piece's, with a template) in
// an LRU cache bounded both by entries and by the tokens held, keyed by a
// 64-bit hash of role and content (of the piece's text). To rule out a wrong hit it also checks the role, the content's
// length and a second, independently seeded 64-bit hash of the content: a
// wrong hit needs a 128-bit collision, so no copy of the content is kept. The
// hashes are seeded at random per Prompter, so they cannot be steered by
// crafted input and mean nothing outside the process.
//
// # Block hashes
//
// A prompt's tokens are cut into blocks of Config.BlockSize tokens (the last
// block may be partial and is included). Block i's value hashes block i-1's
// value together with block i's token ids, so two prompts have equal values
// at block i exactly when (barring a 64-bit collision) their first i+1 blocks
// hold equal tokens. The hash is fixed (see Blocks) and the same in every
// process and on every platform.
package tokenize
