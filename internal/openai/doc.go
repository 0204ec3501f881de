// Package openai reads the bodies of OpenAI-style inference requests for the
// router. Given the method, path, content type and buffered body of a request
// it tells chat completions, completions and Responses API calls apart and
// extracts what routing needs: the model, whether the response streams, the
// output-token budget, the user, and the prompt flattened to text (Messages or
// Prompts) for the tokenizer that computes prefix hashes. Bad input gets an
// *Error in OpenAI's error format, ready to send back to the client.
//
// Flattening is built so that equal prompt prefixes give equal text and
// different prompts give different text: text parts are kept verbatim,
// images, audio and files become markers carrying a hash of their canonical
// JSON, and structured parts of the prompt (tool definitions, tool calls,
// Responses API items) are written as canonical JSON (compact, keys sorted),
// so formatting and key order do not change the result.
//
// The package is not a validator of the whole OpenAI schema: sampling
// parameters and unknown fields pass through unchecked for the engine to
// judge, and only what routing reads is type-checked. It is not a chat
// template renderer (the text is for hashing, not for the model), it does not
// tokenize, and it does no I/O: the ext_proc server buffers the body and calls
// Parse. The body is read by a small hand-written JSON reader that
// validates and extracts in one pass (reader.go), because encoding/json
// spends most of the router's 100 µs budget for a 32 KB body just checking
// that it is valid JSON.
//
// The pieces, one file each:
//   - kind.go: Kind and Classify, which decide from method and path alone.
//   - mediatype.go: which Content-Type values count as JSON.
//   - parse.go: Parse, the checks in order and the dispatch by Kind.
//   - request.go: Request, Message and Limits.
//   - errors.go, errmsg.go: Error and how each failure is worded.
//   - param.go: parameter paths such as messages[2].content, built lazily.
//   - reader.go: the JSON reader: structure, numbers, literals, skipping.
//   - jsonstring.go: JSON strings, the reader's hot loop.
//   - values.go: typed value readers that report errors with a param path.
//   - canon.go: canonical JSON, for tools, tool calls and non-message items.
//   - marker.go: the markers that stand for images, audio and files.
//   - content.go: message content (strings and content parts) as text.
//   - common.go: top-level fields shared by all kinds (model, stream, tools).
//   - chat.go, completion.go, responses.go: one request kind each.
package openai
