package openai

// parseResponses reads the body of a Responses API request, an object,
// positioned at its '{'.
func parseResponses(r *reader) (*Request, error) {
	var (
		c                       common
		items                   []Message
		hasInput, hasMax        bool
		instructions            string
		maxOut                  int
		inputP, instrP, maxOutP = field(nil, "input"), field(nil, "instructions"), field(nil, "max_output_tokens")
	)
	err := c.members(r, func(key []byte) (known bool, err error) {
		switch string(key) {
		case "input":
			items, hasInput, err = r.responsesInput(&inputP)
		case "instructions":
			instructions, _, err = r.optStr(&instrP)
		case "max_output_tokens":
			maxOut, hasMax, err = r.optCount(&maxOutP)
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
	if !hasInput {
		return nil, errMissing(&inputP)
	}
	var system []Message
	if instructions != "" {
		system = []Message{{Role: "system", Content: instructions}}
	}
	req.Messages = append(c.prefix(system...), items...)
	if hasMax {
		req.MaxTokens = maxOut
	}
	return req, nil
}

// responsesInput reads "input": a non-empty string (one user message), a
// non-empty array of input items, or null (present == false).
func (r *reader) responsesInput(p *param) (items []Message, present bool, err error) {
	switch r.peek() {
	case 'n':
		return nil, false, r.literal("null")
	case '"':
		s, err := r.nonEmptyStr(p)
		if err != nil {
			return nil, false, err
		}
		return []Message{{Role: "user", Content: s}}, true, nil
	case '[':
	default:
		return nil, false, r.typeErr(p, "a string or an array of input items")
	}
	items, err = r.messageArray(p, func(ep param) (Message, error) { return r.inputItem(&ep) })
	return items, err == nil, err
}

const responsesRoles = "'user', 'assistant', 'system' and 'developer'"

func isResponsesRole(role string) bool {
	switch role {
	case "user", "assistant", "system", "developer":
		return true
	}
	return false
}

// inputItem reads one Responses API input item, an object. An item with
// "type": "message", or with no type but a "role", is a message: its role
// must be one of responsesRoles and its content a string or an array of
// content parts, flattened as for chat. Any other item (function_call,
// function_call_output, reasoning, ...) becomes a Message with Role the
// item's type and Content the item's canonical JSON.
//
// The type is only known once the whole item is read, so the first pass
// notes where role and content are and a second pass reads what is needed.
func (r *reader) inputItem(p *param) (Message, error) {
	if r.peek() != '{' {
		return Message{}, r.typeErr(p, "an object")
	}
	start, depth := r.pos, r.depth
	if err := r.open(); err != nil {
		return Message{}, err
	}
	var (
		typ                    string
		hasType                bool
		roleAt, contentAt      = -1, -1
		typeP, roleP, contentP = field(p, "type"), field(p, "role"), field(p, "content")
		at                     = func(pos int) reader { return reader{data: r.data, pos: pos, depth: depth + 1} }
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
		case "type":
			typ, err = r.str(&typeP)
			hasType = true
		case "role":
			roleAt = r.pos
			err = r.skip()
		case "content":
			contentAt = r.pos
			err = r.skip()
		default:
			err = r.skip()
		}
		if err != nil {
			return Message{}, err
		}
	}
	switch {
	case !hasType && roleAt < 0:
		return Message{}, errMissing(&typeP)
	case hasType && typ == "":
		return Message{}, errEmptyString(&typeP)
	case hasType && typ != "message":
		whole := reader{data: r.data, pos: start, depth: depth}
		b, err := whole.canon(nil)
		return Message{Role: typ, Content: string(b)}, err
	case roleAt < 0:
		return Message{}, errMissing(&roleP)
	case contentAt < 0:
		return Message{}, errMissing(&contentP)
	}
	sub := at(roleAt)
	role, err := sub.str(&roleP)
	if err != nil {
		return Message{}, err
	}
	if !isResponsesRole(role) {
		return Message{}, errValue(&roleP, "%s. Supported values are: %s.", quote(role), responsesRoles)
	}
	sub = at(contentAt)
	content, isNull, err := sub.content(&contentP)
	if err != nil {
		return Message{}, err
	}
	if isNull {
		return Message{}, errType(&contentP, "a string or an array of content parts", 'n')
	}
	return Message{Role: role, Content: content}, nil
}
