"""verl's own trainer on CPU: a small plugin registered through verl's and vLLM's extension hooks.

Nothing here edits an installed file:
- vLLM: `hooks/` is an installable distribution holding only the entry point `vllm.general_plugins`
  -> vllm_hooks.register, which vLLM loads in every process it starts (front end, engine core,
  workers). scripts/setup-verlcpu installs it into .venv-verlcpu, next to a .pth naming tools/.
- verl: verl_hooks (its platform registry and engine override), through
  `VERL_USE_EXTERNAL_MODULES=rlaunch.frameworks.verl.cpu.verl_hooks`, which `import verl` imports in
  every process (unlike its `verl.plugins` entry points, whose import errors it drops). Checked in
  one process only: main_ppo has not yet run under it (docs/VERL-ON-CPU.md says where it stopped).
task.py is the rehearsal's task in verl's data layout and reward API; model.py its tiny Qwen2.
"""
