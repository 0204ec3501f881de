package openai

// common holds the top-level fields that every kind of request shares.
type common struct {
	model      string
	hasModel   bool
	stream     bool
	user       string
	tools      []byte // canonical JSON of a non-empty tools array, or nil
	toolChoice []byte // canonical JSON of tool_choice, or nil
}

// field reads the value of the top-level field key if it is one of the
// common ones, and reports whether it was.
func (c *common) field(r *reader, key []byte) (bool, error) {
	var err error
	switch string(key) {
	case "model":
		p := field(nil, "model")
		c.model, c.hasModel, err = r.optStr(&p)
	case "stream":
		p := field(nil, "stream")
		c.stream, err = r.optBool(&p)
	case "user":
		p := field(nil, "user")
		c.user, _, err = r.optStr(&p)
	case "tools":
		c.tools, err = r.tools()
	case "tool_choice":
		p := field(nil, "tool_choice")
		c.toolChoice, err = r.optCanon(&p, 0)
	default:
		return false, nil
	}
	return true, err
}

// finish checks the required model and copies the common fields into req.
func (c *common) finish(req *Request) error {
	p := field(nil, "model")
	switch {
	case !c.hasModel:
		return errMissing(&p)
	case c.model == "":
		return errEmptyString(&p)
	}
	req.Model, req.Stream, req.User = c.model, c.stream, c.user
	return nil
}

// prefix returns the messages that go before the request's own: the
// synthetic tools message when tools are defined (tool_choice alone changes
// nothing the model sees and is dropped), and extra.
func (c *common) prefix(extra ...Message) []Message {
	var out []Message
	if c.tools != nil {
		content := string(c.tools)
		if c.toolChoice != nil {
			content += "\n<tool_choice>" + string(c.toolChoice)
		}
		out = append(out, Message{Role: RoleTools, Content: content})
	}
	return append(out, extra...)
}

// tools reads the top-level "tools": null, or an array of objects, returned
// in canonical form. An empty array is the same as no tools (nil).
func (r *reader) tools() ([]byte, error) {
	p := field(nil, "tools")
	switch r.peek() {
	case 'n':
		return nil, r.literal("null")
	case '[':
	default:
		return nil, r.typeErr(&p, "an array of tools")
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	dst := []byte{'['}
	for i := 0; ; i++ {
		ok, err := r.nextElem(i == 0)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if r.peek() != '{' {
			ep := elem(&p, i)
			return nil, r.typeErr(&ep, "an object")
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = r.canon(dst); err != nil {
			return nil, err
		}
	}
	if len(dst) == 1 {
		return nil, nil
	}
	return append(dst, ']'), nil
}

// members reads the request object positioned at its '{': for each key,
// own is tried first (it reports whether it knew the key), then the fields
// every kind shares (model, stream, user, tools), and anything else is
// skipped.
func (c *common) members(r *reader, own func(key []byte) (bool, error)) error {
	if err := r.open(); err != nil {
		return err
	}
	for first := true; ; first = false {
		key, ok, err := r.nextKey(first)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		done, err := own(key)
		if !done && err == nil {
			if done, err = c.field(r, key); !done && err == nil {
				err = r.skip()
			}
		}
		if err != nil {
			return err
		}
	}
}
