"""rlaunch's command line (python -m rlaunch VERB ...), the one the Makefile calls.

Knobs are the Make variables, passed as --INFRA=gcp --NODES=4 ...; empty means "not set". `make`
passes none on the command line: it exports each knob NAME as RLAUNCH_KNOB_NAME (rlaunch.config.knobs), read
here byte for byte (fire would parse a flag's value: '"x"' -> x, '[a]' -> a list); a flag given here
wins over that environment. SET is dotted.key=value overrides split like a shell command line. Every
verb that acts renders and checks first.

status/logs/down/dashboard/summary act on a run's handle (rlaunch.backends.base.RunHandle): the one
its plan or launch wrote beside its artifacts, build/<run_id>/run.json (or OUT's; default: the last
launch from here). Without one here, INFRA=... and RUN_ID=... name the run, the config says where
that infrastructure is (namespace, shared storage), and the backend asks it what exists of the run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from rlaunch import ROOT, firecli
from rlaunch.backends.base import Backend, LaunchPlan, Place, RunHandle
from rlaunch.backends.local import jobs
from rlaunch.config import ckptsize, cmdfacts, code, inputs, modelfacts
from rlaunch.config import load as config
from rlaunch.config.knobs import KNOBS, RULES, from_env
from rlaunch.config.load import available
from rlaunch.config.spec import Config, Spec
from rlaunch.errors import ConfigError
from rlaunch.job import phases
from rlaunch.plan import imagecheck, memory
from rlaunch.plan.render import shjoin
from rlaunch.registry import backends, frameworks
from rlaunch.runs import board, compare
from rlaunch.runs import listing as runs
from rlaunch.runs import lookup as runref
from rlaunch.validate import early
from rlaunch.verify.summary import closing_summary, markdown_summary

# Where status/logs/down find the last launch; tests point it elsewhere.
LAST_RUN = Path(os.environ.get("RLAUNCH_LAST_RUN") or ROOT / "build" / "last-run")
PLAN_TXT = LaunchPlan.PLAN_TXT  # what `make plan` printed, beside the artifacts it describes


def _knobs(kw: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, value in kw.items():
        if name not in KNOBS:
            raise ConfigError(name, value, "a knob is one of " + ", ".join(KNOBS))
        # fire turns "true"/"3" into bool/int: give the config loader the text the user typed.
        out[name] = str(value).lower() if isinstance(value, bool) else ("" if value is None else str(value))
    return out


def _with_env(given: dict[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """The knobs `make` exported (RLAUNCH_KNOB_*) among `names`, then the flags given here over them."""
    out = {k: v for k, v in from_env().items() if k in names}
    out.update({k: v for k, v in given.items() if v not in (None, "")})
    return out


def _config_args(preset: Any, set_: Any, out: Any, knobs: dict[str, Any]) -> tuple[str, dict[str, str], str]:
    """(PRESET, the knobs, SET's text) as given here or exported by make."""
    if not isinstance(set_, str):  # fire reads --SET='[a, b]' as a list
        set_ = " ".join(map(str, set_))
    given = _with_env({"PRESET": preset, "SET": set_, "OUT": out, **knobs}, {"PRESET", "SET", *config.KNOBS})
    preset, set_ = str(given.pop("PRESET", "")), str(given.pop("SET", ""))
    return preset, _knobs(given), set_


def _spec(preset: Any, set_: Any, out: Any, knobs: dict[str, Any]) -> Spec:
    return config.load(*_config_args(preset, set_, out, knobs))


def _settings(preset: Any, set_: Any, knobs: dict[str, Any]) -> Config:
    """Where the infrastructure is, for a run known only by its id (config.settings: nothing derived)."""
    return config.settings(*_config_args(preset, set_, "", knobs))


def _render(spec: Spec) -> tuple[Backend, dict[str, str]]:
    return backends.get(spec.infra.name), LaunchPlan.render(spec).files


def _write(out: Path, files: dict[str, str]) -> None:
    for relpath, text in files.items():
        path = out / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if text.startswith("#!"):
            path.chmod(0o755)


def _summary(spec: Spec, backend: Backend, files: dict[str, str], checks: list[str], now: list[str]) -> str:
    c, p = spec.cluster, spec.paths
    fw = frameworks.get(spec.framework.name)
    gpus = f"{c.gpus_per_node} x {c.accelerator}" if c.gpus_per_node else "CPU only"
    lines = [
        f"plan for run {spec.run.id} (preset {spec.preset})",
        f"  infra       {spec.infra.name}" + (f" ({spec.infra.sky_infra})"
                                                   if spec.infra.sky_infra else ""),
        f"  nodes       {c.nodes} x ({gpus})",
        f"  framework   {spec.framework.name} {spec.pins.framework_version}"
        f"{' @ ' + spec.pins.framework_commit[:12] if spec.pins.framework_commit else ''}",
        f"  image       {spec.pins.image}",
        f"  algorithm   {spec.algo.name} (group size {spec.algo.group_size})",
        f"  entrypoint  {shjoin(fw.command(spec))}",
        *_inputs_lines(spec, now),
        *([f"  code        {code.describe(spec.pins.code, spec.code.dir)}, on every node at {p.code_dir}"]
          if spec.pins.code else []),
        f"  checkpoints {p.ckpt_dir}",
        f"  run dir     {p.run_dir}   (logs, metrics, preflight.json, verification.json)",
        f"  artifacts   {spec.run.out}/ ({', '.join(sorted(files))})",
        f"  secrets     by reference only: {', '.join(spec.secrets) or '(none)'}",
        "  checks      " + ("\n              ".join(checks) if checks else "(none)"),
    ]
    rewrites = fw.rehearsal_lines(spec)
    if rewrites:  # REHEARSE=1: what changed from the launch it stands in for, and why
        lines.append("  rehearsal   " + "\n              ".join(rewrites))
    lines += [
        "  launch would run:",
    ]
    lines += [f"    {line}" for line in backend.plan(spec, files)]
    return "\n".join(lines)


def _inputs_lines(spec: Spec, now: list[str]) -> list[str]:
    """The inputs layout the run expects on the shared storage (rlaunch.config.inputs), then whether
    they are prepared already (Backend.inputs_now)."""
    found = (inputs.layout(spec) or ["none on the shared storage (the job makes its own)"]) + now
    return [f"  {'inputs' if i == 0 else '':<12}{line}" for i, line in enumerate(found)]


def _inputs_now(backend: Backend, spec: Spec, files: dict[str, str]) -> list[str]:
    """Backend.inputs_now, and a line instead of a refusal whatever it raises: a plan is never
    refused for what it could not learn about the inputs."""
    try:
        return backend.inputs_now(spec, files)
    except Exception as err:  # noqa: BLE001 - any failure to look is "not checked", said
        return [f"inputs: not checked: {type(err).__name__}: {err}"]


class Frameworks:
    """The frameworks rlaunch has a package for (tools/rlaunch/frameworks/<name>/), as the scripts ask."""

    def list(self, validated: Any = False, image: Any = False) -> None:
        """The framework names, one a line; --validated: those with their own config loader;
        --image: those with an rlaunch image (a Dockerfile)."""
        names = [n for n in frameworks.names()
                 if (not _flag(validated) or frameworks.descriptor(n).validator)
                 and (not _flag(image) or frameworks.descriptor(n).images.dockerfile)]
        print("\n".join(names))

    def needs(self, name: Any) -> None:
        """The packages NAME's config loader imports beyond the framework (its validator venv's), one a line."""
        print("\n".join(_validator_needs(name)))

    def show(self, name: Any) -> None:
        """NAME's descriptor as JSON: CPU rule, metric modules, validator, images."""
        print(json.dumps(dataclasses.asdict(frameworks.descriptor(str(name))), indent=2))

    def requires(self, name: Any, site: Any, torch: Any, ray: Any) -> None:
        """The lock inputs of NAME's validator venv (scripts/setup-validators): each package its
        loader needs, with the specifier NAME's own metadata (found in SITE, a site-packages that
        holds NAME alone) gives it, torch and ray at the pins given (TORCH, RAY), one a line."""
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name as _canonical

        for flag, value in (("torch", torch), ("ray", ray)):
            if not isinstance(value, str):  # fire read it as a number: 2.60 would become 2.6
                raise ConfigError(f"--{flag}", value, "a version fire keeps as text (X.Y.Z, or quoted)")
        name = str(name)
        dist = next((d for d in metadata.distributions(path=[str(site)])
                     if _canonical(d.metadata["Name"]) == _canonical(name)), None)
        if dist is None:
            raise ConfigError("site", str(site), f"a site-packages directory that holds {name}")
        given = {}
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or "extra" not in str(req.marker):  # the base requirements only
                given[_canonical(req.name)] = str(req.specifier)
        pinned = {"torch": f"torch=={torch}", "ray": f"ray=={ray}"}
        print("\n".join(pinned.get(_canonical(need), need + given.get(_canonical(need), "")) for need in _validator_needs(name)))


def _validator_needs(name: Any) -> tuple[str, ...]:
    validator = frameworks.descriptor(str(name)).validator
    if validator is None:
        raise ConfigError("framework.name", name, "a framework with its own config loader: "
                          + ", ".join(n for n in frameworks.names() if frameworks.descriptor(n).validator))
    return tuple(validator.needs)


def _flag(value: Any) -> bool:
    return str(value).lower() in ("1", "true", "yes")


class Cli:
    """rlaunch: render, plan, launch, status, logs, down an RL post-training run on Ray."""

    def __init__(self) -> None:
        self.frameworks = Frameworks()

    def render(self, PRESET: Any = "", SET: Any = "", OUT: Any = "",  # noqa: N803 - the Make knobs' names
               **knobs: Any) -> None:
        """Write every artifact of a launch under OUT (default build/<run_id>); touch nothing else."""
        spec = _spec(PRESET, SET, OUT, knobs)
        backend: Backend = backends.get(spec.infra.name)
        plan = LaunchPlan.render(spec)
        _write(plan.out, plan.files)
        backend.handle(plan).write(plan.out)  # what launching these makes: status etc. act on it
        print(f"rendered {len(plan.files)} files to {plan.out}")

    def plan(self, PRESET: Any = "", SET: Any = "", OUT: Any = "", **knobs: Any) -> None:  # noqa: N803
        """Render, run every offline validation, print what launch would do."""
        spec = _spec(PRESET, SET, OUT, knobs)
        self._plan(spec)

    def _plan(self, spec: Spec) -> tuple[Backend, LaunchPlan]:
        """The LaunchPlan: rendered, checked offline, written to OUT with plan.txt, printed."""
        backend, files = _render(spec)
        fw = frameworks.get(spec.framework.name)
        # The checks that wait on another process start now, beside the quick ones (validate.early): the
        # backend's (SkyPilot's parser), the framework's own config loader, on the files every
        # infrastructure renders alike; what the workers import of CODE; REHEARSE=1's reward function
        # run here first; DATA='s rows.
        # Collected in this order: the same lines, the same first refusal as one after another.
        infra = early.Started(lambda: backend.check(spec, files))
        loader = early.Started(lambda: fw.loader_check(spec, files))
        rehearsal = early.Started(lambda: fw.rehearsal_check(spec))
        data = early.Started(lambda: fw.data_check(spec))
        imported = early.Started(lambda: fw.import_check(spec))  # CODE's imports, in the pinned venv
        now = early.Started(lambda: _inputs_now(backend, spec, files))  # a look at the storage: seconds at most
        try:
            # Before anything is written: a run that cannot fit stops here (exit 2), naming its terms.
            checks = [*filter(None, [cmdfacts.line(spec)]), modelfacts.check(spec), memory.check(spec), ckptsize.plan_line(spec),
                      *infra.result(), loader.result()]
            checks += imagecheck.plan_lines(spec)  # an image that does not fit: exit 2, likewise
            checks += imported.result()
            checks += rehearsal.result()
            checks += data.result()
        except BaseException:
            early.stop()  # refused: the answers still awaited no longer matter
            raise
        summary = _summary(spec, backend, files, checks, now.result())
        steps = tuple(backend.plan(spec, files))
        # plan.txt travels with the artifacts: job.sh copies them into the run directory.
        plan = LaunchPlan(spec, Path(spec.run.out), {**files, PLAN_TXT: summary + "\n"}, tuple(checks), steps)
        _write(plan.out, plan.files)
        backend.handle(plan).write(plan.out)  # what launching it makes: launch, status, logs, down act on it
        print(summary)
        plan = dataclasses.replace(plan, started=phases.process_start(), planned=time.time())
        return backend, plan

    def launch(self, PRESET: Any = "", SET: Any = "", OUT: Any = "", RESUME: Any = "",  # noqa: N803
               **knobs: Any) -> None:
        """Plan, then act: form the cluster / submit, follow, verify. RESUME=1 continues RUN_ID."""
        resume = _resume(_with_env({"RESUME": RESUME}, {"RESUME"}).get("RESUME", ""))
        spec = _spec(PRESET, SET, OUT, knobs)
        _smoke_guard(spec)
        backends.get(spec.infra.name).require_secrets(spec)  # exit 3 before anything exists
        # Before anything is written: a used RUN_ID, or one another launch holds, is refused here.
        with backends.get(spec.infra.name).claim(spec, resume):
            backend, plan = self._plan(spec)  # its handle written, before anything is made
            LAST_RUN.parent.mkdir(parents=True, exist_ok=True)
            LAST_RUN.write_text(str(plan.out) + "\n")
            return _exit(backend.launch(plan))  # the plan's files: launch renders nothing again

    def _which(self, RUN_ID: Any = "", OUT: Any = "", PRESET: Any = "", SET: Any = "",
               **knobs: Any) -> RunHandle:  # noqa: N803
        """The run to act on: the handle its launch wrote here (OUT, build/<RUN_ID>, or the last launch)
        when it is for the INFRA asked (or none is asked); otherwise INFRA and RUN_ID name it, the
        config says where that infrastructure is, and the backend asks it what exists of the run."""
        given = _with_env({"RUN_ID": RUN_ID, "OUT": OUT, **_knobs(knobs)}, set(KNOBS))
        run_id, infra = str(given.get("RUN_ID", "")), str(given.get("INFRA", ""))
        found, out_dir = runref.launched(run_id, str(given.get("OUT", "")), LAST_RUN)
        if found is not None and (not infra or found.place.infra == infra) and \
                (not run_id or found.run_id == run_id):
            return found
        handle = out_dir / RunHandle.FILE if out_dir is not None else None
        if not run_id:
            raise ConfigError("RUN_ID", "", "the run to act on: no launch from this machine to default to"
                              + (f" ({out_dir} has no {RunHandle.FILE})" if handle is not None else "")
                              + "; `make runs` lists the runs the infrastructures know")
        if not infra:
            raise ConfigError("INFRA", "", f"the infrastructure run {run_id} is on: this machine has no "
                              f"{handle} to tell ({', '.join(backends.names())}; `make runs` lists "
                              "the runs each infrastructure knows)")
        where = _settings(PRESET, SET, {**knobs, "RUN_ID": run_id})
        backend: Backend = backends.get(where.infra.name)
        return backend.handle_of(run_id, backend.place(where), dashboard_port=where.cluster.dashboard_port,
                                 ray_port=where.cluster.ray_port, wait_s=where.cluster.formation_timeout_s)

    def _act(self, verb: str, **kw: Any) -> None:
        run = self._which(**kw)
        return _exit(getattr(backends.get(run.place.infra), verb)(run))

    def status(self, **kw: Any) -> None:
        """Nodes and job state of the last (or RUN_ID's) launch."""
        return self._act("status", **kw)

    def logs(self, **kw: Any) -> None:
        """Follow the job's log."""
        return self._act("logs", **kw)

    def down(self, **kw: Any) -> None:
        """Remove everything launch created; fine when nothing is up."""
        return self._act("down", **kw)

    def dashboard(self, PORT: Any = "", **kw: Any) -> None:  # noqa: N803
        """Open the Ray dashboard from this machine: a forward (local, KubeRay) or the endpoint."""
        port = _port(_with_env({"PORT": PORT}, {"PORT"}).get("PORT", ""))
        run = self._which(**kw)
        return _exit(backends.get(run.place.infra).dashboard(run, port=port))

    def ssh(self, **kw: Any) -> None:
        """A shell on the run's SkyPilot cluster head (ssh <cluster>)."""
        return self._on_sky("ssh", **kw)

    def ray_status(self, **kw: Any) -> None:
        """`ray status` and `ray summary tasks` on the run's SkyPilot cluster head, over ssh."""
        return self._on_sky("ray_status", **kw)

    def _on_sky(self, verb: str, **kw: Any) -> None:
        run = self._which(**kw)
        name = run.place.infra
        if not backends.infra(name).ssh:
            with_ssh = ", ".join(n for n in backends.names() if backends.infra(n).ssh)
            raise ConfigError("INFRA", name, f"a SkyPilot infrastructure ({with_ssh}): `make {verb.replace('_', '-')}` "
                              "uses the ssh alias SkyPilot writes; `make status` and `make dashboard` work on every "
                              "infrastructure")
        return _exit(getattr(backends.get(name), verb)(run))

    def summary(self, **kw: Any) -> None:
        """The closing summary of the last (or RUN_ID's) launch, from its run directory. In a GitHub
        Actions job ($GITHUB_STEP_SUMMARY set) it is also appended there as Markdown, with the
        verification table."""
        run = self._which(**kw)
        facts = (run.run_id, run.framework or "?", run.place.infra, Path(run.run_dir) if run.run_dir else None,
                 Path(run.out) if run.out else ROOT / "build" / run.run_id)
        print(closing_summary(*facts))
        step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if step_summary:
            with open(step_summary, "a", encoding="utf-8") as fh:
                fh.write(markdown_summary(*facts))

    def runs(self, PRESET: Any = "", SET: Any = "", OUT: Any = "", **knobs: Any) -> None:  # noqa: N803
        """Every rlaunch run the reachable infrastructures know (INFRA=... for one), one line each."""
        infra = str(_with_env(_knobs(knobs), set(KNOBS)).get("INFRA", ""))

        def place(name: str) -> Place:
            backend: Backend = backends.get(name)
            return backend.place(_settings(PRESET, SET, {**knobs, "INFRA": name}))

        print(runs.report(runs.collect(infra, place)))

    def tensorboard(self, RUN_ID: Any = "", OUT: Any = "", RUNS: Any = "", RUN_DIR: Any = "", PORT: Any = "",
                    **_ignored: Any) -> None:  # noqa: N803
        """Serve TensorBoard on localhost for a run (default: the last launch) or several side by side."""
        given = _with_env({"RUN_ID": RUN_ID, "OUT": OUT, "RUNS": RUNS, "RUN_DIR": RUN_DIR, "PORT": PORT},
                          {"RUN_ID", "OUT", "RUNS", "RUN_DIR", "PORT"})
        refs = runref.split_refs(given.get("RUNS", "")) + ([str(given["RUN_DIR"])] if given.get("RUN_DIR") else [])
        if not refs:  # one run, found as status/logs/down find it, else by id on the local storage
            run_id = str(given.get("RUN_ID", "")).strip()
            _, out_dir = runref.launched(run_id, str(given.get("OUT", "")), LAST_RUN)
            refs = [str(out_dir) if out_dir is not None and (out_dir / "spec.json").is_file() else run_id]
            if not refs[0]:
                raise ConfigError("RUN_ID", "", "a run id (or RUNS=\"id1 id2\", RUN_DIR=...): no launch "
                                  "recorded in build/last-run")
        port = _port(given.get("PORT", ""))
        return _exit(board.serve(runref.find_all(refs), port))

    def compare(self, RUNS: Any = "", OUT: Any = "", **_ignored: Any) -> None:  # noqa: N803
        """One PNG of the runs' reward curves (smoothed, labelled by id and differing config), and a table."""
        given = _with_env({"RUNS": RUNS, "OUT": OUT}, {"RUNS", "OUT"})
        refs, out = str(given.get("RUNS", "")), str(given.get("OUT", "")).strip()
        found = runref.find_all(refs)
        if len(found) < 1:
            raise ConfigError("RUNS", refs, 'one or more run ids or run directories, e.g. RUNS="id1 id2"')
        target = Path(out) if out else None
        if target is not None and (target.is_dir() or out.endswith("/")):
            target = target / compare.default_out(found).name  # a directory: the default name in it
        elif target is not None and target.suffix.lower() != ".png":
            raise ConfigError("OUT", out, "a .png file or a directory (the curves are one PNG)")
        png, text = compare.compare(found, target)
        print(text)
        print(f"compare: reward curves of {len(found)} run(s) in {png}")

    def job(self, action: Any, address: str, submission_id: str, **kw: Any) -> None:
        """submit | follow | status | stop a Ray job (used inside the cluster's network)."""
        fn: dict[str, Callable[..., int]] = {"submit": jobs.submit, "follow": jobs.follow, "status": jobs.status,
                                             "stop": jobs.stop}
        if action not in fn:
            raise ConfigError("job", action, "submit, follow, status or stop")
        return _exit(fn[action](address, submission_id, **kw))

    def presets(self) -> None:
        """List the presets."""
        print("\n".join(available("presets")))

    def config(self, PRESET: Any = "", SET: Any = "", OUT: Any = "", **knobs: Any) -> None:  # noqa: N803
        """Print the merged, validated spec as JSON."""
        print(_spec(PRESET, SET, OUT, knobs).json_text(), end="")


def _smoke_guard(spec: Spec) -> None:
    """A real run never resumes from a smoke run's directory, nor a smoke run writes into a real
    one's. Where the run directory is on this machine (INFRA=local) it is checked before anything
    starts; everywhere, job.sh checks it again on the cluster."""
    run_dir, smoke = Path(spec.paths.run_dir), spec.train.smoke
    if (run_dir / "SMOKE").exists() and not smoke:
        raise ConfigError("RUN_ID", spec.run.id, f"an id whose run directory is not a smoke run's: {run_dir} "
                          "holds SMOKE, and a real run never resumes from a smoke run")
    if smoke and (run_dir / "spec.json").exists() and not (run_dir / "SMOKE").exists():
        raise ConfigError("RUN_ID", spec.run.id, f"a new id for the smoke run: {run_dir} holds a real run")


def _resume(value: Any) -> bool:
    """RESUME= as typed: empty or 0 is a new run, 1 continues RUN_ID (rlaunch.config.knobs' rule)."""
    text = str(value).strip().lower()
    text = {"true": "1", "false": "0"}.get(text, text)  # fire reads --RESUME=1 as True
    problem = RULES["RESUME"](text) if text else None
    if problem:
        raise ConfigError("RESUME", value, problem + " (1: continue RUN_ID from its last checkpoint)")
    return text == "1"


def _port(value: Any) -> int | None:
    """PORT= as typed: empty means the verb's default; otherwise a TCP port (0: any free one)."""
    text = str(value).strip()
    if not text:
        return None
    if not text.isdigit() or int(text) > 65535:
        raise ConfigError("PORT", text, "a TCP port, 0-65535 (0: any free port)")
    return int(text)


def _exit(code: Any) -> None:
    if code:
        raise SystemExit(int(code))


def main(argv: list[str] | None = None) -> int:
    return firecli.run(Cli, "rlaunch", "rlaunch", argv)
