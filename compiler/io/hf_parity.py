"""Run an exported Hugging Face checkpoint on given inputs, in a process of its own.

This file is a script as well as a module: `python hf_parity.py CASES OUT` imports `transformers`
and `torch` and nothing of tracr-compile (it says so at the end). For each job of the JSON file
CASES (`[{"folder": ..., "inputs": ["1 2 3", ...], "value_token": null or "<value>"}, ...]`) it
loads the checkpoint with `AutoModelForCausalLM` / `AutoTokenizer`, runs the inputs in padded
batches with the tokenizer's attention mask, and writes to OUT, per job and input, the argmax
token texts after BOS (categorical) or the value token's logits (numerical), with the modules of
this project that were imported (none, or the check failed).
`compiler.io.huggingface.run_in_fresh_process` calls it.
"""

from __future__ import annotations

import json
import sys

PROJECT_PACKAGES = ("compiler", "compression", "constructions", "craft", "rasp", "benchmarks")


def run_job(folder: str, inputs: list[str], value_token: str | None, batch: int = 256) -> list:
    """The outputs of one checkpoint on its inputs (module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    value_id = None if value_token is None else tokenizer.convert_tokens_to_ids(value_token)
    outputs = []
    for start in range(0, len(inputs), batch):
        texts = inputs[start : start + batch]
        encoded = tokenizer(texts, return_tensors="pt", padding=True)
        with torch.no_grad():
            logits = model(**encoded).logits
        for row, text in enumerate(texts):
            length = len(text.split())
            if value_id is None:
                outputs.append(tokenizer.convert_ids_to_tokens(logits[row, 1 : length + 1].argmax(-1).tolist()))
            else:
                outputs.append(logits[row, 1 : length + 1, value_id].tolist())
    return outputs


def main(cases_path: str, out_path: str) -> None:
    """Run every job of CASES and write the outputs to OUT (module docstring)."""
    with open(cases_path, encoding="utf-8") as handle:
        jobs = json.load(handle)
    outputs = [run_job(job["folder"], job["inputs"], job.get("value_token")) for job in jobs]
    imported = sorted(name for name in sys.modules if name.split(".")[0] in PROJECT_PACKAGES)
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump({"outputs": outputs, "project_modules": imported}, handle)


if __name__ == "__main__":
    main(*sys.argv[1:3])
