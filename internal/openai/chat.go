package openai

// parseChat reads the body of a chat completions request, an object,
// positioned at its '{'.
func parseChat(r *reader) (*Request, error) {
	var (
		c                       common
		msgs                    []Message
		hasMsgs                 bool
		maxTok, maxCompl        int
		hasMaxTok, hasMaxCompl  bool
		msgsP, maxTokP, maxCmpP = field(nil, "messages"), field(nil, "max_tokens"), field(nil, "max_completion_tokens")
		kwargsP                 = field(nil, "chat_template_kwargs")
		gen, hasGen, cont       bool
		kwargs                  []byte
	)
	err := c.members(r, func(key []byte) (known bool, err error) {
		switch string(key) {
		case "messages":
			msgs, hasMsgs, err = r.chatMessages(&msgsP)
		case "max_tokens":
			maxTok, hasMaxTok, err = r.optCount(&maxTokP)
		case "max_completion_tokens":
			maxCompl, hasMaxCompl, err = r.optCount(&maxCmpP)
		case "add_generation_prompt":
			gen, hasGen, err = r.lenientBool()
		case "continue_final_message":
			cont, _, err = r.lenientBool()
		case "chat_template_kwargs":
			if r.peek() != '{' {
				err = r.skip() // not ours to refuse: the engine decides
				break
			}
			kwargs, err = r.optCanon(&kwargsP, '{')
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return nil, err
	}
	req := &Request{}
	if err := c.finish(req); err != nil {
		return nil, err
	}
	if !hasMsgs {
		return nil, errMissing(&msgsP)
	}
	req.Messages = append(c.prefix(), msgs...)
	req.NoGenerationPrompt, req.ContinueFinalMessage = hasGen && !gen, cont
	if kwargs != nil {
		req.TemplateKwargs = string(kwargs)
	}
	switch {
	case hasMaxCompl:
		req.MaxTokens = maxCompl
	case hasMaxTok:
		req.MaxTokens = maxTok
	}
	return req, nil
}

// lenientBool reads a JSON boolean (present), or skips any other value
// (not present): the router only follows a field the engine reads, it does
// not judge it (vLLM's own validation accepts more than booleans).
func (r *reader) lenientBool() (v, present bool, err error) {
	switch r.peek() {
	case 't':
		return true, true, r.literal("true")
	case 'f':
		return false, true, r.literal("false")
	}
	return false, false, r.skip()
}

// chatMessages reads "messages": a non-empty array of messages, or null
// (present == false).
func (r *reader) chatMessages(p *param) (msgs []Message, present bool, err error) {
	switch r.peek() {
	case 'n':
		return nil, false, r.literal("null")
	case '[':
	default:
		return nil, false, r.typeErr(p, "an array of messages")
	}
	msgs, err = r.messageArray(p, func(ep param) (Message, error) { return r.chatMessage(&ep) })
	return msgs, err == nil, err
}

// messageArray reads a non-empty array positioned at its '[', one element
// at a time with one (given the element's param by value, so it stays on
// the stack).
func (r *reader) messageArray(p *param, one func(param) (Message, error)) ([]Message, error) {
	if err := r.open(); err != nil {
		return nil, err
	}
	var msgs []Message
	for i := 0; ; i++ {
		ok, err := r.nextElem(i == 0)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		m, err := one(elem(p, i))
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil, errEmptyArray(p)
	}
	return msgs, nil
}

// chatRoles is the list of chat roles for error messages; isChatRole is the
// test.
const chatRoles = "'system', 'developer', 'user', 'assistant', 'tool' and 'function'"

func isChatRole(role string) bool {
	switch role {
	case "system", "developer", "user", "assistant", "tool", "function":
		return true
	}
	return false
}

// chatMessage reads one chat message: an object with a "role" and a
// "content", which only assistant and function messages may omit or leave
// null. An assistant's "tool_calls" (and legacy "function_call") and a tool
// message's "tool_call_id" are appended to the content (see
// Message.Content); "name" is type-checked and otherwise ignored, as are
// unknown fields.
func (r *reader) chatMessage(p *param) (Message, error) {
	if r.peek() != '{' {
		return Message{}, r.typeErr(p, "an object")
	}
	if err := r.open(); err != nil {
		return Message{}, err
	}
	var (
		m                     Message
		hasRole, hasContent   bool
		contentNull           bool
		toolCalls, funcCall   []byte
		toolCallID            string
		roleP, contentP       = field(p, "role"), field(p, "content")
		toolCallsP, funcCallP = field(p, "tool_calls"), field(p, "function_call")
		toolCallIDP, nameP    = field(p, "tool_call_id"), field(p, "name")
	)
	for first := true; ; first = false {
		key, ok, err := r.nextKey(first)
		if err != nil {
			return Message{}, err
		}
		if !ok {
			break
		}
		switch string(key) {
		case "role":
			m.Role, err = r.str(&roleP)
			hasRole = true
		case "content":
			m.Content, contentNull, err = r.content(&contentP)
			hasContent = true
		case "tool_calls":
			toolCalls, err = r.optCanon(&toolCallsP, '[')
		case "function_call":
			funcCall, err = r.optCanon(&funcCallP, '{')
		case "tool_call_id":
			toolCallID, _, err = r.optStr(&toolCallIDP)
		case "name":
			_, _, err = r.optStr(&nameP)
		default:
			err = r.skip()
		}
		if err != nil {
			return Message{}, err
		}
	}
	switch {
	case !hasRole:
		return Message{}, errMissing(&roleP)
	case !isChatRole(m.Role):
		return Message{}, errValue(&roleP, "%s. Supported values are: %s.", quote(m.Role), chatRoles)
	}
	if m.Role != "assistant" && m.Role != "function" {
		switch {
		case !hasContent:
			return Message{}, errMissing(&contentP)
		case contentNull:
			return Message{}, errType(&contentP, "a string or an array of content parts", 'n')
		}
	}
	m.Content = appendLine(m.Content, "<tool_calls>", toolCalls)
	m.Content = appendLine(m.Content, "<function_call>", funcCall)
	if toolCallID != "" {
		m.Content = appendLine(m.Content, "<tool_call_id>", []byte(toolCallID))
	}
	return m, nil
}

// appendLine appends tag and value to text, on a new line unless text is
// empty. A nil value appends nothing.
func appendLine(text, tag string, value []byte) string {
	if value == nil {
		return text
	}
	if text != "" {
		text += "\n"
	}
	return text + tag + string(value)
}
