"""verl's own trainer on CPU: a small plugin registered through verl's and vLLM's extension hooks.

Nothing here edits an installed file:
- vLLM: `hooks/` is an installable distribution holding only the entry point `vllm.general_plugins`
  -> vllm_hooks.register, which vLLM loads in every process it starts (front end, engine core,
  workers). scripts/setup-verlcpu installs it into .venv-verlcpu, next to a .pth naming tools/.
- verl (not written yet, docs/VERL-ON-CPU.md): its platform and engine registries, through
  `VERL_USE_EXTERNAL_MODULES`, which `import verl` imports in every process (unlike its
  `verl.plugins` entry points, whose import errors it logs at debug level and drops).
"""
