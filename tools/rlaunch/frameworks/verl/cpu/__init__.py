"""verl's own trainer on CPU (REHEARSE=1): a small plugin registered through verl's and vLLM's
extension hooks, and the rehearsal's pieces.

Nothing here edits an installed file:
- vLLM: `hooks/` is an installable distribution holding only the entry point `vllm.general_plugins`
  -> vllm_hooks.register, which vLLM loads in every process it starts (front end, engine core,
  workers). scripts/setup-verlcpu installs it into .venv-verlcpu, next to a .pth naming tools/.
- verl: verl_hooks (its platform registry and engine override), through
  `VERL_USE_EXTERNAL_MODULES=rlaunch.frameworks.verl.cpu.verl_hooks`, which `import verl` imports in
  every process (unlike its `verl.plugins` entry points, whose import errors it drops).
The rehearsal: rewrites (what verl needs changed on CPU, each with why), model (the tiny Qwen2 and its
ChatML tokenizer), prepare (the model and the dataset's rehearsal rows on the shared storage),
reward_probe and plan (the reward check and the plan's rehearsal section). docs/VERL-ON-CPU.md has
the measurements.
"""
