"""The launcher's metadata check of prepared inputs (issue 46, rlaunch.job.objects): the node records
the objects' versions with the cloud's CLI (a PATH stub `aws` that checks its argv), the launcher
lists them with the real boto3 against a local stand-in S3 server (ListObjectsV2, GetObject), and
`make launch` skips the CPU step only when they match; a changed object (same size, new ETag), no
record, no credentials or an error runs the step, saying why. `make plan` says the same per input
within a few seconds; R2 is the same API at its own endpoint, with SkyPilot's R2 credentials."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse
from xml.sax.saxutils import escape

import pytest

from rlaunch.backends.base import LaunchPlan
from rlaunch.backends.skypilot import backend as sp
from rlaunch.config import load as config
from rlaunch.job import objects
from rlaunch.plan import artifacts


class FakeS3(BaseHTTPRequestHandler):
    """Path-style S3: GET /BUCKET?list-type=2&prefix=P and GET /BUCKET/KEY, from `store`."""

    store: dict[str, dict[str, tuple[str, bytes]]] = {}  # bucket -> key -> (etag, body)
    asked: list[str] = []
    signed: list[str] = []  # each request's Authorization header: whose credentials signed it

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: bytes, kind: str = "application/xml") -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        bucket, _, key = unquote(url.path).lstrip("/").partition("/")
        query = parse_qs(url.query)
        self.asked.append(f"{bucket}/{key}?{url.query}")
        self.signed.append(self.headers.get("Authorization", ""))
        objs = self.store.get(bucket)
        if objs is None:
            return self._send(404, b"<Error><Code>NoSuchBucket</Code><Message>no bucket</Message></Error>")
        if not key:
            prefix = query.get("prefix", [""])[0]
            rows = "".join(f"<Contents><Key>{escape(k)}</Key><ETag>{escape(e)}</ETag><Size>{len(b)}</Size>"
                           "<LastModified>2026-12-06T00:00:00.000Z</LastModified><StorageClass>STANDARD"
                           "</StorageClass></Contents>" for k, (e, b) in sorted(objs.items()) if k.startswith(prefix))
            body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>{bucket}</Name><Prefix>'
                    f"{escape(prefix)}</Prefix><KeyCount>{rows.count('<Contents>')}</KeyCount><MaxKeys>1000"
                    f"</MaxKeys><IsTruncated>false</IsTruncated>{rows}</ListBucketResult>")
            return self._send(200, body.encode())
        if key not in objs:
            return self._send(404, b"<Error><Code>NoSuchKey</Code><Message>no key</Message></Error>")
        return self._send(200, objs[key][1], "application/octet-stream")


@pytest.fixture()
def s3(monkeypatch, tmp_path):
    FakeS3.store, FakeS3.asked, FakeS3.signed = {}, [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeS3)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield FakeS3.store
    server.shutdown()
    server.server_close()


PREFIX = "models/m/abc"
FILES = {"config.json": ("\"e1\"", b"{}"), "model.safetensors": ("\"e2\"", b"w" * 64),
         "SHA256SUMS": ("\"e3\"", b"sums"), "SHA256SUMS.stamp": ("\"e4\"", b"stamp")}


def prepared(store: dict, tmp_path: Path, monkeypatch, scheme: str = "s3", cli_tail: str = "") -> str:
    """The bucket as a CPU step leaves it: the files, then the record the node wrote with `aws`
    (called with the listing's arguments, then `cli_tail`: more of them, and its credentials file)."""
    store["inp"] = {f"{PREFIX}/{k}": v for k, v in FILES.items()}
    listing = {"Contents": [{"Key": k, "ETag": e, "Size": len(b)} for k, (e, b) in store["inp"].items()]}
    stub = tmp_path / "bin" / "aws"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(f"#!/usr/bin/env bash\necho \"$* ${{AWS_SHARED_CREDENTIALS_FILE}}\" >>{tmp_path}/aws.calls\n"
                    f"cat <<'J'\n{json.dumps(listing)}\nJ\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub.parent}:/usr/bin:/bin")
    node_dir = tmp_path / "node"
    node_dir.mkdir(exist_ok=True)
    url = f"{scheme}://inp/{PREFIX}"
    assert objects.main(["record", url, str(node_dir)]) == 0
    assert (tmp_path / "aws.calls").read_text() == (f"s3api list-objects-v2 --bucket inp --prefix {PREFIX}/ --output "
                                                    f"json{cli_tail or ' ' + os.environ['AWS_SHARED_CREDENTIALS_FILE']}\n")
    record = (node_dir / objects.RECORD).read_text()
    assert json.loads(record)["objects"]["model.safetensors"] == {"version": "\"e2\"", "size": 64}
    store["inp"][f"{PREFIX}/{objects.RECORD}"] = ("\"e5\"", record.encode())  # the mount writes it through
    return url


def test_recorded_versions_match_and_a_changed_object_is_caught(s3, tmp_path, monkeypatch):
    url, clients = prepared(s3, tmp_path, monkeypatch), {}  # one boto3 client for the test: ~0.5 s each
    assert objects.compare(url, clients=clients) == (4, "")
    # Same size, new content: a new ETag.
    s3["inp"][f"{PREFIX}/model.safetensors"] = ("\"e9\"", b"x" * 64)
    count, why = objects.compare(url, clients=clients)
    assert count is None and "1 object(s) under s3://inp/models/m/abc differ" in why and "model.safetensors" in why
    # A file added after the record, or one gone, is caught too.
    s3["inp"][f"{PREFIX}/model.safetensors"] = FILES["model.safetensors"]
    s3["inp"][f"{PREFIX}/extra.bin"] = ("\"e7\"", b"x")
    assert objects.compare(url, clients=clients)[0] is None


def test_no_record_no_bucket_no_credentials_each_say_why(s3, tmp_path, monkeypatch):
    s3["inp"] = {f"{PREFIX}/config.json": ("\"e1\"", b"{}")}
    clients: dict = {}
    assert "no SHA256SUMS.objects under s3://inp/models/m/abc" in objects.compare(f"s3://inp/{PREFIX}",
                                                                                   clients=clients)[1]
    assert "could not list s3://gone/x: NoSuchBucket" in objects.compare("s3://gone/x", clients=clients)[1]
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    assert "NoCredentialsError" in objects.compare(f"s3://inp/{PREFIX}")[1]


def test_a_record_the_node_cannot_list_is_a_warning_not_a_failed_step(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no aws CLI at all
    assert objects.main(["record", "s3://inp/p", str(tmp_path)]) == 0
    assert not (tmp_path / objects.RECORD).exists()
    assert "warning: no SHA256SUMS.objects" in capsys.readouterr().err


STUB = """#!/usr/bin/env bash
echo "$*" >>"${STUB_DIR}/calls"
case "$*" in check*) echo '{"default": {"AWS": ["compute", "storage"]}}' ;; esac
"""


def aws_spec(tmp_path: Path, **knobs: str):
    return config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "aws", "RUN_ID": "t-obj", "OUT": str(tmp_path / "out"),
                                               **knobs}, "train.save_freq=20 storage.source=s3://inp")


def both_prepared(s3: dict, spec) -> list[str]:
    """Both inputs' objects and their records on the stand-in bucket: their URLs, dataset first."""
    urls = [sp.object_url(spec, item.dir) for item in sp.inputs.of(spec)]
    assert [u.split("/")[3] for u in urls] == ["data", "models"]
    for url in urls:
        key = url.removeprefix("s3://inp/")
        s3.setdefault("inp", {}).update({f"{key}/a": ("\"1\"", b"a")})
        s3["inp"][f"{key}/{objects.RECORD}"] = ("\"r\"", json.dumps(
            {"url": url, "objects": {"a": {"version": "\"1\"", "size": 1}}}).encode())
    return urls


def test_launch_skips_the_cpu_step_only_when_every_input_matches(s3, tmp_path, monkeypatch, capsys):
    sky = tmp_path / "sky"
    sky.write_text(STUB)
    sky.chmod(0o755)
    monkeypatch.setenv("RLAUNCH_SKY", str(sky))
    monkeypatch.setenv("STUB_DIR", str(tmp_path))
    spec = aws_spec(tmp_path)
    files = artifacts.finish(spec, sp.BACKEND.render(spec))
    urls = both_prepared(s3, spec)
    assert f"record {urls[0]}" in files["setup.sh"]

    def launch() -> list[str]:
        (tmp_path / "calls").unlink(missing_ok=True)
        assert sp.BACKEND.launch(LaunchPlan(spec=spec, out=tmp_path / "out", files=files)) == 0
        return (tmp_path / "calls").read_text().splitlines()

    assert not any(c.startswith("launch --down") for c in launch())
    assert "skypilot: inputs prepared (2 objects match): CPU step skipped" in capsys.readouterr().out
    key = urls[1].removeprefix("s3://inp/")
    s3["inp"][f"{key}/a"] = ("\"2\"", b"b")  # changed on the storage
    assert any(c.startswith("launch --down -c t-obj-inputs") for c in launch())
    assert "skypilot: the CPU step runs: 1 object(s) under" in capsys.readouterr().out
    # SPOT=1: the GPU task alone instead of the pipeline, once the objects match again.
    s3["inp"][f"{key}/a"] = ("\"1\"", b"a")
    spec = aws_spec(tmp_path, SPOT="1")
    files = artifacts.finish(spec, sp.BACKEND.render(spec))
    assert launch()[-1] == f"jobs launch -n t-obj {tmp_path}/out/task.yaml -y"


def test_the_record_is_never_an_input_of_the_manifest(tmp_path):
    """A re-download writes SHA256SUMS again over a directory holding the last step's record: the
    record is left out, or every later full check would fail on it."""
    from rlaunch.job import data

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / objects.RECORD).write_text("{}")
    data.write_manifest(tmp_path)
    assert [line.split()[1] for line in (tmp_path / "SHA256SUMS").read_text().splitlines()] == ["config.json"]


def test_plan_says_for_each_input_whether_the_cpu_step_will_run(s3, tmp_path):
    spec = aws_spec(tmp_path)
    files = {sp.INPUTS_TASK: ""}  # a CPU step is rendered: all inputs_now asks of the files
    step = f"make launch runs the CPU step ({sp._inputs_instance(spec)})"
    urls = both_prepared(s3, spec)
    assert sp.BACKEND.inputs_now(spec, files) == [
        f"{what}: prepared (1 object match its SHA256SUMS.objects): the CPU step will be skipped"
        for what in ("dataset", "model")]
    s3["inp"][urls[1].removeprefix("s3://inp/") + "/a"] = ("\"2\"", b"b")  # the model changed on the storage
    dataset, model = sp.BACKEND.inputs_now(spec, files)
    assert dataset == ("dataset: prepared (1 object match its SHA256SUMS.objects): the CPU step keeps it (its "
                       "stamp checked, no byte read)")
    assert model == (f"model: not prepared: 1 object(s) under {urls[1]} differ from what the CPU step recorded "
                     f"(first: a): {step}")
    assert not any(a.startswith("PUT") for a in FakeS3.asked)  # read-only: GETs alone (the handler has no PUT)


def test_plan_answers_at_once_without_credentials_and_within_its_deadline_without_an_answer(
        tmp_path, monkeypatch):
    spec = aws_spec(tmp_path, SPOT="1")  # conftest: no credentials in a test, on any machine
    files, url, instance = {sp.INPUTS_TASK: ""}, sp.object_url(spec, sp.inputs.of(spec)[1].dir), sp._inputs_instance(spec)
    started = time.monotonic()
    model = sp.BACKEND.inputs_now(spec, files)[1]
    assert time.monotonic() - started < 1.5  # at once: nothing asked (the deadline is PLAN_LOOK_S, 5 s)
    assert model == (f"model: not checked: no credentials for {url} here (`aws configure` makes them; an instance "
                     f"role is asked by make launch alone): the managed job runs the CPU step first ({instance})")
    with socket.socket() as silent:  # credentials, and a store that accepts the connection and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setattr(sp, "PLAN_LOOK_S", 0.3)
        started = time.monotonic()
        model = sp.BACKEND.inputs_now(spec, files)[1]
        assert time.monotonic() - started < 0.3 + 1.5  # the deadline, and a loaded machine's slack
        while any(t.name.startswith(objects.LOOK_THREAD) for t in threading.enumerate()):  # the listing left behind
            assert time.monotonic() - started < 10, "boto3's own timeouts end it"
            time.sleep(0.05)  # its retries must not reach the next test's server on this port
    assert model.startswith(f"model: not checked: no answer for {url} within 0.3 s: the managed job runs")


def test_r2_is_recorded_and_compared_like_s3_at_its_endpoint_with_skypilots_credentials(s3, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".cloudflare").mkdir(parents=True)
    (home / ".cloudflare" / "r2.credentials").write_text("[r2]\naws_access_key_id = r2key\n"
                                                          "aws_secret_access_key = r2secret\n")
    (home / ".cloudflare" / "accountid").write_text("acct123\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")  # R2's profile alone signs
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    url = prepared(s3, tmp_path, monkeypatch, "r2", " --profile r2 --endpoint-url https://acct123.r2.cloudflarestorage"
                   f".com {home}/.cloudflare/r2.credentials")
    monkeypatch.setattr(objects, "R2_ENDPOINT", os.environ["AWS_ENDPOINT_URL_S3"])  # the stand-in for R2's
    assert objects.look([url], 5.0) == [(4, "")]
    s3["inp"][f"{PREFIX}/model.safetensors"] = ("\"e9\"", b"x" * 64)  # same size, new content
    assert "1 object(s) under r2://inp/models/m/abc differ" in str(objects.compare(url)[1])
    assert FakeS3.signed and all("Credential=r2key/" in a for a in FakeS3.signed)
    spec = config.load("verl-ppo-gsm8k-0.5b", {"INFRA": "aws", "RUN_ID": "t-obj"}, "storage.store=r2")
    assert sp.object_url(spec, sp.inputs.of(spec)[1].dir).startswith("r2://rlaunch-inputs-rlaunch-test/models/")


def test_a_plan_is_never_refused_for_what_it_could_not_learn_of_the_inputs(tmp_path):
    from rlaunch.cli import commands

    class Broken(sp.SkyPilot):
        def inputs_now(self, spec, files):
            raise RuntimeError("no catalog")

    assert commands._inputs_now(Broken(), aws_spec(tmp_path), {}) == ["inputs: not checked: RuntimeError: no catalog"]
