// Package tokenize turns an LLM request's prompt into what the router's
// scheduler needs: the prompt's length in tokens and the chained block hashes
// of its tokens.
//
// It is for estimating prefill work and prefix-cache overlap from the router:
// Prompter.Messages (chat) and Prompter.Text (completions) return a Prompt,
// and Blocks is the block hashing that the simulated model server must share
// with the router. It is not for producing the exact token ids a model server
// feeds its model: the chat template is approximated (see Prompter.Messages)
// and the default encoder only approximates a tokenizer. It starts no
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
// # Block hashes
//
// A prompt's tokens are cut into blocks of Config.BlockSize tokens (the last
// block may be partial and is included). Block i's value hashes block i-1's
// value together with block i's token ids, so two prompts have equal values
// at block i exactly when (barring a 64-bit collision) their first i+1 blocks
// hold equal tokens. The hash is fixed (see Blocks) and the same in every
// process and on every platform.
package tokenize
