package openai

import "strconv"

// parseCompletion reads the body of a completions request, an object,
// positioned at its '{'.
func parseCompletion(r *reader) (*Request, error) {
	var (
		c                 common
		prompts           []string
		hasPrompt, hasMax bool
		maxTok            int
		promptP, maxP     = field(nil, "prompt"), field(nil, "max_tokens")
	)
	err := c.members(r, func(key []byte) (known bool, err error) {
		switch string(key) {
		case "prompt":
			prompts, hasPrompt, err = r.prompts(&promptP)
		case "max_tokens":
			maxTok, hasMax, err = r.optCount(&maxP)
		case "tools", "tool_choice":
			err = r.skip() // not part of the completions API
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
	if !hasPrompt {
		return nil, errMissing(&promptP)
	}
	req.Prompts = prompts
	if hasMax {
		req.MaxTokens = maxTok
	}
	return req, nil
}

// prompts reads "prompt": a non-empty string, a non-empty array of non-empty
// strings, a non-empty array of token ids (one prompt), or a non-empty array
// of non-empty arrays of token ids; or null (present == false). Token ids
// are non-negative integers; a token-id prompt is returned as the ids'
// decimal text joined by spaces.
func (r *reader) prompts(p *param) (prompts []string, present bool, err error) {
	switch r.peek() {
	case 'n':
		return nil, false, r.literal("null")
	case '"':
		s, err := r.nonEmptyStr(p)
		if err != nil {
			return nil, false, err
		}
		return []string{s}, true, nil
	case '[':
	default:
		return nil, false, r.typeErr(p, "a string, an array of strings, or an array of token ids")
	}
	if err := r.open(); err != nil {
		return nil, false, err
	}
	var (
		mode byte   // what the first element was: '"', '0' (a token id) or '['
		toks []byte // the prompt when mode is '0'
	)
	for i := 0; ; i++ {
		ok, err := r.nextElem(i == 0)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			break
		}
		ep := elem(p, i)
		kind := r.peek()
		if kind == '-' || kind >= '0' && kind <= '9' {
			kind = '0'
		}
		if i == 0 {
			if kind != '"' && kind != '0' && kind != '[' {
				return nil, false, r.typeErr(&ep, "a string, a token id, or an array of token ids")
			}
			mode = kind
		}
		if kind != mode {
			return nil, false, r.typeErr(&ep, promptElemWant(mode))
		}
		switch mode {
		case '"':
			s, err := r.nonEmptyStr(&ep)
			if err != nil {
				return nil, false, err
			}
			prompts = append(prompts, s)
		case '0':
			if toks, err = r.appendTokenID(toks, &ep); err != nil {
				return nil, false, err
			}
		default:
			s, err := r.tokenIDs(&ep)
			if err != nil {
				return nil, false, err
			}
			prompts = append(prompts, s)
		}
	}
	switch {
	case mode == 0:
		return nil, false, errEmptyArray(p)
	case mode == '0':
		prompts = []string{string(toks)}
	}
	return prompts, true, nil
}

func promptElemWant(mode byte) string {
	switch mode {
	case '"':
		return "a string"
	case '0':
		return "a token id"
	default:
		return "an array of token ids"
	}
}

// tokenIDs reads a non-empty array of token ids as their decimal text
// joined by spaces.
func (r *reader) tokenIDs(p *param) (string, error) {
	if err := r.open(); err != nil {
		return "", err
	}
	var toks []byte
	for i := 0; ; i++ {
		ok, err := r.nextElem(i == 0)
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		ep := elem(p, i)
		if toks, err = r.appendTokenID(toks, &ep); err != nil {
			return "", err
		}
	}
	if len(toks) == 0 {
		return "", errEmptyArray(p)
	}
	return string(toks), nil
}

// appendTokenID reads a token id and appends its decimal text to dst,
// after a space unless dst is empty.
func (r *reader) appendTokenID(dst []byte, p *param) ([]byte, error) {
	c := r.peek()
	if c != '-' && (c < '0' || c > '9') {
		return nil, r.typeErr(p, "a token id")
	}
	text, err := r.readNumber()
	if err != nil {
		return nil, err
	}
	n, ok, isInt := parseCount(text)
	switch {
	case !isInt:
		return nil, errType(p, "a token id (an integer)", c)
	case !ok:
		return nil, errValue(p, "%s is not a token id (a non-negative integer in range).", quote(string(text)))
	}
	if len(dst) > 0 {
		dst = append(dst, ' ')
	}
	return strconv.AppendInt(dst, int64(n), 10), nil
}
