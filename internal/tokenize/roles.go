package tokenize

// The chat rendering, described in the package doc under "Chat rendering".

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
