package openai

// content reads a message's content: a string, or an array of content parts
// flattened to text (see Message.Content), or null, reported as isNull for
// the caller to judge. Parts are text parts, kept verbatim and joined with
// "\n", or other parts, which become markers.
func (r *reader) content(p *param) (text string, isNull bool, err error) {
	switch r.peek() {
	case '"':
		b, err := r.readString(nil, strView)
		return string(b), false, err
	case 'n':
		return "", true, r.literal("null")
	case '[':
		if err := r.open(); err != nil {
			return "", false, err
		}
		var buf []byte
		for i := 0; ; i++ {
			ok, err := r.nextElem(i == 0)
			if err != nil {
				return "", false, err
			}
			if !ok {
				return string(buf), false, nil
			}
			if i > 0 {
				buf = append(buf, '\n')
			}
			ep := elem(p, i)
			if buf, err = r.part(buf, &ep); err != nil {
				return "", false, err
			}
		}
	default:
		return "", false, r.typeErr(p, "a string or an array of content parts")
	}
}

// isTextPart reports whether a content part of type typ is text held in its
// "text" field: "text" in chat completions, "input_text" and "output_text"
// in the Responses API. Either API's names are accepted in both.
func isTextPart(typ string) bool {
	return typ == "text" || typ == "input_text" || typ == "output_text"
}

// part reads one content part, an object with a string "type", and appends
// its text to dst. A text part contributes its "text"; a "refusal" part its
// "refusal" string; any other type, including ones this package does not
// know (engines add their own, such as video_url), contributes a marker
// hashing the part's canonical JSON. Fields other than these are allowed.
func (r *reader) part(dst []byte, p *param) ([]byte, error) {
	if r.peek() != '{' {
		return nil, r.typeErr(p, "an object")
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	mark := len(dst) // the text, if any, is decoded straight into dst[mark:]
	var (
		typ, refusal       string
		hasType, hasText   bool
		hasRefusal         bool
		textGot, refGot    byte // first byte of a non-string text or refusal
		others             []member
		typeP, textP, refP = field(p, "type"), field(p, "text"), field(p, "refusal")
	)
	for first := true; ; first = false {
		key, ok, err := r.nextKey(first)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			if typ, err = r.str(&typeP); err != nil {
				return nil, err
			}
			hasType = true
		case "text":
			dst, hasText, textGot = dst[:mark], false, r.peek()
			if textGot == '"' {
				if dst, err = r.readString(dst, strAppend); err != nil {
					return nil, err
				}
				hasText = true
				continue
			}
			m := member{key: "text"}
			if m.val, err = r.canon(nil); err != nil {
				return nil, err
			}
			others = append(others, m)
		case "refusal":
			hasRefusal, refGot = false, r.peek()
			if refGot == '"' {
				if refusal, err = r.str(&refP); err != nil {
					return nil, err
				}
				hasRefusal = true
				continue
			}
			m := member{key: "refusal"}
			if m.val, err = r.canon(nil); err != nil {
				return nil, err
			}
			others = append(others, m)
		default:
			m := member{key: string(key)}
			if m.val, err = r.canon(nil); err != nil {
				return nil, err
			}
			others = append(others, m)
		}
	}
	switch {
	case !hasType:
		return nil, errMissing(&typeP)
	case typ == "":
		return nil, errEmptyString(&typeP)
	case isTextPart(typ):
		if !hasText {
			if textGot != 0 {
				return nil, errType(&textP, "a string", textGot)
			}
			return nil, errMissing(&textP)
		}
		return dst, nil
	case typ == "refusal":
		if !hasRefusal {
			if refGot != 0 {
				return nil, errType(&refP, "a string", refGot)
			}
			return nil, errMissing(&refP)
		}
		return append(dst[:mark], refusal...), nil
	}
	// Any other part: a marker over the whole part in canonical form.
	if hasText {
		others = append(others, member{key: "text", val: appendQuoted(nil, dst[mark:])})
	}
	if hasRefusal {
		others = append(others, member{key: "refusal", val: appendQuoted(nil, refusal)})
	}
	others = append(others, member{key: "type", val: appendQuoted(nil, typ)})
	return append(dst[:mark], marker(typ, appendObject(nil, others))...), nil
}
