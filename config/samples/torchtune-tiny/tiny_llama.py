"""The torchtune sample's initializers, offline: ``python3 tiny_llama.py model|dataset DIR``.

``model`` writes a Llama 3.2-shaped model of 2 layers and width 16 (8 MB, almost all of it the 128,256-token
embedding) as Hugging Face writes one, where upstream's model initializer downloads Llama-3.2-1B-Instruct:
``DIR/model/model.safetensors`` (random weights, seeded), ``DIR/model/config.json`` and a tiktoken
tokenizer of the 256 single bytes at ``DIR/model/original/tokenizer.model``. ``dataset`` writes 16
instruction/output rows as JSON lines at ``DIR/dataset/train.json``, where upstream's dataset initializer
downloads an Alpaca data set. The sizes match the TrainJob's ``model.*`` overrides (``trainjob.yaml``)."""

import base64
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

VOCAB = 128_256  # Llama 3's: its tokenizer's special tokens are ids 128,000 to 128,255
DIM, HEADS, KV_HEADS, LAYERS, HIDDEN = 16, 2, 1, 2, 32


def model(out: Path) -> None:
    (out / "original").mkdir(parents=True, exist_ok=True)
    ranks = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256))
    (out / "original" / "tokenizer.model").write_text(ranks)
    head = DIM // HEADS
    seed = torch.Generator().manual_seed(0)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=seed) * 0.02

    tensors = {"model.embed_tokens.weight": weight(VOCAB, DIM), "model.norm.weight": torch.ones(DIM)}
    for i in range(LAYERS):
        layer = f"model.layers.{i}."
        tensors |= {
            f"{layer}self_attn.q_proj.weight": weight(HEADS * head, DIM),
            f"{layer}self_attn.k_proj.weight": weight(KV_HEADS * head, DIM),
            f"{layer}self_attn.v_proj.weight": weight(KV_HEADS * head, DIM),
            f"{layer}self_attn.o_proj.weight": weight(DIM, HEADS * head),
            f"{layer}mlp.gate_proj.weight": weight(HIDDEN, DIM),
            f"{layer}mlp.up_proj.weight": weight(HIDDEN, DIM),
            f"{layer}mlp.down_proj.weight": weight(DIM, HIDDEN),
            f"{layer}input_layernorm.weight": torch.ones(DIM),
            f"{layer}post_attention_layernorm.weight": torch.ones(DIM),
        }
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {
        "model_type": "llama",
        "vocab_size": VOCAB,
        "hidden_size": DIM,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": head,
        "num_hidden_layers": LAYERS,
        "intermediate_size": HIDDEN,
        "tie_word_embeddings": True,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"model: {sum(t.numel() for t in tensors.values())} parameters in {out}")


def dataset(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = [{"instruction": f"Add {n} and {n}.", "input": "", "output": str(2 * n)} for n in range(16)]
    (out / "train.json").write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"dataset: {len(rows)} rows in {out / 'train.json'}")


if __name__ == "__main__":
    what, where = sys.argv[1], Path(sys.argv[2])
    {"model": model, "dataset": dataset}[what](where / what)
