"""Render chat templates the way vLLM and SGLang do, for the router's tests.

Reads one JSON object on stdin, {"cases": [case, ...]}, each case
{"template": str, "messages": [...], "tools": [...] or null,
"add_generation_prompt": bool, "continue_final_message": bool,
"vars": {"bos_token": ..., ...}}, and writes
{"results": [{"text": str} or {"error": str}, ...]} on stdout, one result per
case in order.

The renderer is transformers' own render_jinja_template, the function behind
tokenizer.apply_chat_template(tokenize=False) that vLLM and SGLang call for a
chat request: its sandboxed Jinja environment (trim_blocks, lstrip_blocks,
loop controls, tojson, raise_exception, strftime_now, namespace). It needs no
model, tokenizer or GPU stack. Run it with the virtualenv python that
scripts/chattmpl.sh prints.
"""

import json
import sys

from transformers.utils.chat_template_utils import render_jinja_template


def render(case):
    kwargs = dict(case.get("vars") or {})
    text = render_jinja_template(
        conversations=[case["messages"]],
        tools=case.get("tools"),
        chat_template=case["template"],
        add_generation_prompt=bool(case.get("add_generation_prompt")),
        continue_final_message=bool(case.get("continue_final_message")),
        **kwargs,
    )
    if isinstance(text, tuple):  # (rendered, generation_indices) in some versions
        text = text[0]
    if isinstance(text, list):
        text = text[0]
    return text


def main():
    cases = json.load(sys.stdin)["cases"]
    results = []
    for case in cases:
        try:
            results.append({"text": render(case)})
        except Exception as e:  # the template's own raise_exception included
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump({"results": results}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
