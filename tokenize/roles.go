package tokenize

// The chat template approximation. Model servers render a chat through the
// model's own template (special tokens around each message) before
// tokenizing; the router does not need that exact rendering, only a
// deterministic one in which equal leading messages give equal leading
// tokens and whose length is close. So each message is rendered as its role
// marker followed by its content, each encoded on its own, and a chat ends
// with the assistant's marker, as a server does when it adds the generation
// prompt. A chat's tokens are then the concatenation of its messages' tokens,
// which is what lets Prompter cache them per message, and a turn's tokens are
// a prefix of the next turn's (which repeats the chat and adds the reply and
// a new message).

// roleMarker is the text rendered before a message's content: "<|role|>\n".
func roleMarker(role string) string { return "<|" + role + "|>\n" }

// commonRoles lists the roles whose markers a Prompter encodes once, up
// front; markers of other roles are encoded with each message that misses
// the cache.
func commonRoles() []string {
	return []string{"system", "developer", "user", "assistant", "tool", "function"}
}

// generationRole is the role whose marker ends every chat.
const generationRole = "assistant"
