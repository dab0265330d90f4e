# rlaunch: one experiment config -> a checked, reproducible, verified RL post-training launch on Ray.
# `make help` lists the targets; knobs are `make VAR=value`. Targets are thin: the work lives in
# tools/rlaunch (python -m rlaunch) and scripts/.

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
RUN_ID ?=         ## default <preset>-<UTC timestamp>; status/logs/down default to the last launch
SET ?=            ## space-separated dotted.key=value overrides, e.g. SET="train.steps=50 algo.lr=1e-5"
OUT ?=            ## render directory (default build/<run_id>)
SPOT ?=           ## 1: SkyPilot managed job with recovery
RDMA ?=           ## 1: InfiniBand/RDMA (IPC_LOCK); off sets NCCL_IB_DISABLE=1
INFRA_SPEC ?=     ## INFRA=sky: any SkyPilot infra string (gcp/us-central1, k8s/ctx, ...)
K8S_FLAVOR ?=     ## INFRA=kuberay: gke | vke | generic
WORK_ROOT ?=      ## INFRA=aistudio: shared-storage path for the run script
ACCELERATOR ?=    ## GPU type (H100, A100, ...)
DATASET ?=        ## make data: gsm8k (default) | math
REGISTRY ?=       ## make image-push: registry/owner to push to
TAG ?=            ## make image-build/image-push: image tag (default: the tag pinned in configs/versions.yaml)
RUN_DIR ?=        ## make verify: an existing run directory

VENV ?= .venv
PY := $(VENV)/bin/python
RLAUNCH := $(PY) -m rlaunch
KNOBS := --PRESET="$(PRESET)" --SET="$(SET)" --OUT="$(OUT)" --INFRA="$(INFRA)" --ALGO="$(ALGO)" \
	--FRAMEWORK="$(FRAMEWORK)" --NODES="$(NODES)" --GPUS_PER_NODE="$(GPUS_PER_NODE)" \
	--RUN_ID="$(RUN_ID)" --SPOT="$(SPOT)" --RDMA="$(RDMA)" --INFRA_SPEC="$(INFRA_SPEC)" \
	--K8S_FLAVOR="$(K8S_FLAVOR)" --WORK_ROOT="$(WORK_ROOT)" --ACCELERATOR="$(ACCELERATOR)"
WHICH_RUN := --RUN_ID="$(RUN_ID)" --OUT="$(OUT)"

##@ Help
.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} \
	  /^##@/ {printf "\n\033[1m%s\033[0m\n", substr($$0, 5)} \
	  /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2} \
	  /^[A-Z0-9_]+ \?=.*## / {split($$0, a, "## "); split(a[1], b, " "); printf "  \033[33m%-18s\033[0m %s\n", b[1], a[2]}' \
	  $(MAKEFILE_LIST)

.PHONY: presets
presets: $(VENV)/.rlaunch-setup ## List the presets
	@$(RLAUNCH) presets

##@ Setup
.PHONY: setup setup-validators
setup: ## Build the launcher environment (.venv), pinned by configs/versions.yaml
	@scripts/setup

$(VENV)/.rlaunch-setup:
	@scripts/setup

setup-validators: ## Build the framework validator environments (verl, AReaL, RLinf loaders)
	@scripts/setup-validators

##@ Launch
.PHONY: render plan launch status logs down dashboard verify
render: $(VENV)/.rlaunch-setup ## Write every artifact of a launch under OUT; touch nothing else
	@$(RLAUNCH) render $(KNOBS)

plan: $(VENV)/.rlaunch-setup ## Render, validate offline, print what launch would run
	@$(RLAUNCH) plan $(KNOBS)

launch: $(VENV)/.rlaunch-setup ## Plan, then launch, follow and verify (default: the local CPU rehearsal)
	@$(RLAUNCH) launch $(KNOBS)

status: $(VENV)/.rlaunch-setup ## Nodes and job state of the last launch (or RUN_ID's)
	@$(RLAUNCH) status $(WHICH_RUN)

logs: $(VENV)/.rlaunch-setup ## Follow the job's log
	@$(RLAUNCH) logs $(WHICH_RUN)

dashboard: $(VENV)/.rlaunch-setup ## Show or port-forward the Ray dashboard (8265)
	@$(RLAUNCH) dashboard $(WHICH_RUN)

down: $(VENV)/.rlaunch-setup ## Remove everything the launch created; fine when nothing is up
	@$(RLAUNCH) down $(WHICH_RUN)

verify: $(VENV)/.rlaunch-setup ## Postflight on an existing run directory: make verify RUN_DIR=...
	@$(RLAUNCH) verify postflight --run-dir="$(RUN_DIR)"

##@ Data and images
.PHONY: data image-build image-push kuberay-operator
data: $(VENV)/.rlaunch-setup ## Prepare a dataset as verl parquet + SHA256SUMS: make data DATASET=gsm8k OUT=dir
	@$(PY) -m rlaunch.data --dataset="$(or $(DATASET),gsm8k)" --out="$(or $(OUT),build/data/$(or $(DATASET),gsm8k))"

image-build: ## Build docker/<FRAMEWORK> on the pinned official image: make image-build FRAMEWORK=verl
	@REGISTRY="$(REGISTRY)" TAG="$(TAG)" scripts/image build "$(FRAMEWORK)"

image-push: ## Push the image to REGISTRY
	@REGISTRY="$(REGISTRY)" TAG="$(TAG)" scripts/image push "$(FRAMEWORK)"

kuberay-operator: ## Install the pinned KubeRay operator with Helm (idempotent)
	@scripts/kuberay-operator

##@ Development
.PHONY: test test-unit test-bats lint golden bench
test: $(VENV)/.rlaunch-setup ## Run every test (pytest + bats + lint + the rehearsal)
	@scripts/test

lint: $(VENV)/.rlaunch-setup ## shellcheck, hadolint, workflow schema, zizmor, yamllint
	@$(PY) -m pytest -q tests/unit/test_lint.py

golden: $(VENV)/.rlaunch-setup ## Regenerate tests/golden from the presets
	@$(PY) tests/golden/regen.py

bench: $(VENV)/.rlaunch-setup ## Benchmarks: cluster formation and plan time (build/bench/*.json)
	@tests/bench/run
