#!/usr/bin/env python3
"""llama_model.py writes a small random-weight Llama-architecture GGUF model.

For: scripts/llama.sh, which gives llama-server a model on machines without a
model hub. The weights are random (normal, std 0.02), so the text it generates
is gibberish, but every prompt token costs real compute, so prefix caching,
batching and routing show real effects. The tokenizer is a real one: the
tokenizer.* keys are copied from a vocab-only GGUF file (llama.cpp ships
models/ggml-vocab-llama-spm.gguf, the Llama-2 SentencePiece vocabulary).

Needs the gguf package and numpy. Deterministic for a given --seed.
"""

import argparse
import sys

import numpy as np

import gguf

# A ChatML template: short, and recognised by llama-server's built-in
# template detection, so no --jinja is needed.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def positive(name, value):
    if value <= 0:
        sys.exit(f"llama_model.py: --{name} must be positive, got {value}")
    return value


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", required=True, help="vocab-only GGUF file to take the tokenizer from")
    p.add_argument("--out", required=True, help="GGUF file to write")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256, help="embedding length")
    p.add_argument("--ffn", type=int, default=768, help="feed-forward length")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ctx", type=int, default=8192, help="training context length")
    p.add_argument("--seed", type=int, default=18)
    a = p.parse_args()
    for name in ("layers", "width", "ffn", "heads", "kv_heads", "ctx"):
        positive(name.replace("_", "-"), getattr(a, name))
    if a.width % a.heads:
        sys.exit(f"llama_model.py: --width {a.width} is not a multiple of --heads {a.heads}")
    if a.heads % a.kv_heads:
        sys.exit(f"llama_model.py: --heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}")
    head_dim = a.width // a.heads

    reader = gguf.GGUFReader(a.vocab)
    tok_fields = {name: f for name, f in reader.fields.items() if name.startswith("tokenizer.")}
    tokens = tok_fields.get("tokenizer.ggml.tokens")
    if tokens is None:
        sys.exit(f"llama_model.py: {a.vocab} has no tokenizer.ggml.tokens")
    n_vocab = len(tokens.data)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(f"dualmap-tiny-l{a.layers}-w{a.width}")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.width)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_vocab_size(n_vocab)
    for name, f in tok_fields.items():
        if name == "tokenizer.chat_template":
            continue
        main = f.types[0]
        if main == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), main, sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), main)
    w.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(a.seed)

    def mat(rows, cols):  # numpy shape (rows, cols) is GGUF ne {cols, rows}
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def norm():
        return np.ones(a.width, dtype=np.float32)

    kv_width = a.kv_heads * head_dim
    w.add_tensor("token_embd.weight", mat(n_vocab, a.width))
    for i in range(a.layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm())
        w.add_tensor(b + "attn_q.weight", mat(a.width, a.width))
        w.add_tensor(b + "attn_k.weight", mat(kv_width, a.width))
        w.add_tensor(b + "attn_v.weight", mat(kv_width, a.width))
        w.add_tensor(b + "attn_output.weight", mat(a.width, a.width))
        w.add_tensor(b + "ffn_norm.weight", norm())
        w.add_tensor(b + "ffn_gate.weight", mat(a.ffn, a.width))
        w.add_tensor(b + "ffn_up.weight", mat(a.ffn, a.width))
        w.add_tensor(b + "ffn_down.weight", mat(a.width, a.ffn))
    w.add_tensor("output_norm.weight", norm())
    w.add_tensor("output.weight", mat(n_vocab, a.width))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"llama_model.py: wrote {a.out}: {a.layers} layers, width {a.width}, vocab {n_vocab}", file=sys.stderr)


if __name__ == "__main__":
    main()
