""".github/workflows/down.yml executed for real by `act` (tests/actrun.py) as on a GitHub-hosted
runner (its user: not root, tests/e2e/conftest.py): a fresh copy of the work tree, so an empty
build/, where the workflow's `make setup` builds the environment and `make down INFRA=... RUN_ID=...`
can only ask the infrastructure. sky and kubectl are recording PATH stubs (no cloud or Kubernetes
API server runs here) that answer as SkyPilot's API server and a cluster's API server would:
  - gcp: SkyPilot knows cluster exp-7, so `sky down -y exp-7` (through the shared API server the
    repository variable names, with the service-account token in the environment, never argv);
  - kuberay: objects labelled rlaunch.io/run=exp-7 exist, so kubectl deletes them by that label,
    after the lookup (the kubeconfig from the secret);
  - kuberay, a run id the cluster does not know: one line naming the query, exit 0, nothing deleted;
  - gcp, an API server that cannot be reached: exit 3 and the job fails, nothing torn down.
A SkyPilot infra without the API server variable stops before the setup (tests/unit/test_workflows.py).

Cost: each act run is one `make setup` (a fresh 2.7 GB venv, ~100 s of CPU) and seconds of `make
down`; the four run two at a time (pip keeps about one core busy). Measured on a 2-core machine
shared with other jobs (load 12-22): 16.5 min in all, 7-9 min a pair."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from actrun import Stub, run_workflow

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.full]
SERVER = "https://sky.example.org:46580"
TOKEN = "sky_act-token-value"
CONTEXT = "gke_proj_us-central1_train"
SKY_ENV = ("SKYPILOT_API_SERVER_ENDPOINT", "SKYPILOT_SERVICE_ACCOUNT_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS")
NO_JOBS = "sky.exceptions.ClusterNotUpError: No in-progress managed jobs.\n"
KINDS = "rayjobs.ray.io,configmaps,secrets,persistentvolumeclaims,podmonitors.monitoring.coreos.com"
SERVED = "configmaps\nsecrets\npersistentvolumeclaims\npersistentvolumes\npodmonitors.monitoring.coreos.com\nrayjobs.ray.io\n"
KUBECONFIG = "apiVersion: v1\nkind: Config\ncurrent-context: train\n"


def sky(**replies) -> Stub:
    api = json.dumps({"server": {"url": SERVER, "status": "healthy"}})
    return Stub(env=SKY_ENV, replies={"api info": api, "jobs queue": Stub(stderr=NO_JOBS, exit=1), **replies})


def kubectl(**replies) -> Stub:
    return Stub(env=("KUBECONFIG",), replies={"config current-context": CONTEXT + "\n", "api-resources": SERVED,
                                              **replies})


CLUSTER = json.dumps([{"name": "exp-7", "status": "UP", "nodes": 2, "accelerators": "{'H100': 1}", "cloud": "GCP",
                       "launched_at": int(time.time()) - 7200, "labels": {"rlaunch-run": "exp-7"}}])
SCENARIOS = {
    "gcp": ({"infra": "gcp", "run_id": "exp-7"},
            {"sky": sky(**{"status": CLUSTER, "down": "Terminating cluster exp-7...done.\n"})}),
    "kuberay": ({"infra": "kuberay", "run_id": "exp-7"},
                {"kubectl": kubectl(**{f"get {KINDS}": "rayjob.ray.io/exp-7\nconfigmap/exp-7-artifacts\n"
                                                       "secret/exp-7-secrets\n",
                                       "get persistentvolumes": "persistentvolume/exp-7-data-default\n",
                                       "delete": "deleted\n"})}),
    "kuberay-unknown": ({"infra": "kuberay", "run_id": "exp-8"}, {"kubectl": kubectl()}),
    "gcp-unreachable": ({"infra": "gcp", "run_id": "exp-7"},
                        {"sky": sky(status=Stub(stderr=f"Failed to connect to SkyPilot API server at {SERVER}.\n",
                                                exit=1))}),
}


@pytest.fixture(scope="module")
def downs(runner_user):
    base = Path(tempfile.mkdtemp(prefix=f"rlaunch-act-down-{os.getpid()}-"))
    base.chmod(0o755)  # each scenario's folder is handed to the runner user
    pip = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}  # the machine's, as launch's test

    def one(name):
        inputs, stubs = SCENARIOS[name]
        started = time.monotonic()
        run = run_workflow("down.yml", inputs, tmp=base / name, user=runner_user, env=pip, stubs=stubs,
                           variables={"SKYPILOT_API_SERVER_ENDPOINT": SERVER},
                           secrets={"SKYPILOT_SERVICE_ACCOUNT_TOKEN": TOKEN, "KUBECONFIG_DATA": KUBECONFIG,
                                    "GCP_CREDENTIALS_JSON": '{"type": "service_account"}'}, timeout=1500)
        return name, run, time.monotonic() - started

    try:
        started = time.monotonic()
        # Two at a time: each is a pip install that keeps about one core busy.
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = {name: (run, seconds) for name, run, seconds in pool.map(one, SCENARIOS)}
        print(f"act down.yml x{len(SCENARIOS)}: {time.monotonic() - started:.0f} s in all; "
              + ", ".join(f"{n} {s:.0f} s" for n, (_, s) in results.items()))
        yield {name: run for name, (run, _) in results.items()}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def only_main_steps(run) -> dict:
    return {k: v for k, v in run.steps.items() if k != "Check out"}


def test_gcp_from_an_empty_build_asks_the_shared_server_then_sky_down(downs):
    run = downs["gcp"]
    assert run.ok, run.log[-6000:]
    assert only_main_steps(run) == {"Check inputs": "success", "SkyPilot API server": "success",
                                    "Set up": "success", "Credentials": "success", "Down": "success"}
    assert "skypilot: taking down sky cluster exp-7 (UP)" in run.output("Down")
    assert run.calls("sky") == [["status", "-u", "-o", "json", "exp-7"], ["jobs", "queue", "-u", "-o", "json"],
                                ["down", "-y", "exp-7"]]
    for env in run.call_env("sky"):  # the shared API server and its token, by environment only
        assert env["SKYPILOT_API_SERVER_ENDPOINT"] == SERVER and env["SKYPILOT_SERVICE_ACCOUNT_TOKEN"] == TOKEN
        assert env["GOOGLE_APPLICATION_CREDENTIALS"].endswith("/gcp-credentials.json")
    assert TOKEN not in run.log and not any(TOKEN in a for call in run.calls("sky") for a in call)


def test_kuberay_from_an_empty_build_deletes_by_the_runs_label_after_the_lookup(downs):
    run = downs["kuberay"]
    assert run.ok, run.log[-6000:]
    out = run.output("Down")
    assert f"kuberay: deleting 4 objects of run exp-7 (context {CONTEXT})" in out
    assert "kuberay: nothing of run exp-7 left in namespace default" in out
    sel = ["-l", "rlaunch.io/run=exp-7"]
    common = [*sel, "--ignore-not-found", "--timeout=300s"]
    assert run.calls("kubectl") == [
        ["config", "current-context"], ["api-resources", "-o", "name"],
        ["get", KINDS, "-n", "default", *sel, "-o", "name"], ["get", "persistentvolumes", *sel, "-o", "name"],
        ["delete", KINDS, "-n", "default", *common], ["delete", "persistentvolumes", *common]]
    assert all(env["KUBECONFIG"].endswith("/kubeconfig") for env in run.call_env("kubectl"))


def test_a_run_id_the_cluster_does_not_know_is_one_line_and_exit_0(downs):
    run = downs["kuberay-unknown"]
    assert run.ok, run.log[-6000:]
    assert (f"kuberay: nothing of run exp-8 in namespace default of context {CONTEXT}: `kubectl get "
            f"{KINDS},persistentvolumes -l rlaunch.io/run=exp-8` found none: nothing to do") in run.output("Down")
    assert not [c for c in run.calls("kubectl") if c[0] == "delete"]


def test_an_unreachable_skypilot_server_fails_the_job_with_exit_3(downs):
    run = downs["gcp-unreachable"]
    assert not run.ok and run.steps["Down"] == "failure", run.log[-6000:]
    out = run.output("Down")
    assert "rlaunch: missing an answer from SkyPilot" in out and f"Failed to connect to SkyPilot API server at {SERVER}" in out
    assert "] Error 3" in out  # make's line for the recipe: rlaunch exited 3
    assert run.calls("sky") == [["status", "-u", "-o", "json", "exp-7"]]
