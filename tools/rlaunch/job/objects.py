"""The storage's own versions of prepared inputs: recorded on the node, compared by the launcher.

At the end of SkyPilot's CPU step, on its node (which has the bucket's credentials and the cloud's
CLI), `record` lists the objects under an input directory's prefix with that CLI and writes
SHA256SUMS.objects beside SHA256SUMS: each object's size and version (generation on GCS, ETag on S3
and on Cloudflare R2, which is S3's API at its own endpoint). Before the next CPU step, the launcher
lists the same prefix with the cloud's own Python client (`listing`: boto3, google-cloud-storage, the
clients SkyPilot itself uses for those stores) and compares it with the record (`compare`): equal, and
the inputs are what that step prepared and verified, so the step is skipped. Anything else (no client,
no credentials, a changed object, an error) makes the step run, as before, with the reason said.
`make plan` asks the same question (`look`) within a few seconds, with the credentials found here
alone (no instance metadata server is asked), and never waits longer.

Usage (on the node; never fails the step, a record it cannot write is only a warning):
    python -m rlaunch.job.objects record URL DIR     URL: gs://, s3:// or r2://BUCKET/PREFIX

Env:
    RLAUNCH_OBJECTS_TIMEOUT_S  seconds one listing may take, on the node or the launcher (default 60)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

RECORD = "SHA256SUMS.objects"
STORES = {"gs": "gcs", "s3": "s3", "r2": "r2"}  # URL scheme -> store; others (azure, ...) are not recorded
# Cloudflare R2 as SkyPilot reaches it (sky.adaptors.cloudflare): profile [r2] of its own credentials
# file, the endpoint named by the account id; the same files on the launcher and on the nodes.
R2_CREDENTIALS = "~/.cloudflare/r2.credentials"
R2_ACCOUNT_ID = "~/.cloudflare/accountid"
R2_PROFILE = "r2"
R2_ENDPOINT = "https://{account}.r2.cloudflarestorage.com"
Objects = dict[str, dict[str, Any]]  # key relative to the prefix -> {"version": str, "size": int}


def timeout_s() -> float:
    raw = os.environ.get("RLAUNCH_OBJECTS_TIMEOUT_S", "60")
    return float(raw) if raw.replace(".", "", 1).isdigit() and float(raw) > 0 else 60.0


def split(url: str) -> tuple[str, str, str]:
    """(scheme, bucket, prefix ending in '/') of gs://, s3:// or r2://BUCKET/PREFIX."""
    scheme, _, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme not in STORES or not bucket or not rest:
        raise ValueError(f"{url!r}: not gs://, s3:// or r2://BUCKET/PREFIX")
    return scheme, bucket, prefix.strip("/") + "/" if prefix.strip("/") else ""


def _kept(key: str, prefix: str) -> str:
    """The key relative to the prefix; "" for the record itself and for the prefix's own placeholder."""
    rel = key[len(prefix):]
    return "" if rel in ("", RECORD) else rel


# ---------------------------------------------------------------- the node: the cloud's CLI


def r2_endpoint() -> str:
    """R2's S3 endpoint for the account SkyPilot's accountid file names (its first line)."""
    account = Path(R2_ACCOUNT_ID).expanduser().read_text(encoding="utf-8").strip().splitlines()[0].strip()
    return R2_ENDPOINT.format(account=account)


def cli_argv(url: str) -> list[str]:
    scheme, bucket, prefix = split(url)
    if scheme == "gs":
        return ["gcloud", "storage", "objects", "list", f"gs://{bucket}/{prefix}**", "--format=json"]
    argv = ["aws", "s3api", "list-objects-v2", "--bucket", bucket, "--prefix", prefix, "--output", "json"]
    return argv + (["--profile", R2_PROFILE, "--endpoint-url", r2_endpoint()] if scheme == "r2" else [])


def cli_env(url: str) -> dict[str, str]:
    """The CLI's environment: R2's credentials file, where SkyPilot keeps it, for `aws`."""
    if split(url)[0] != "r2":
        return dict(os.environ)
    return {**os.environ, "AWS_SHARED_CREDENTIALS_FILE": str(Path(R2_CREDENTIALS).expanduser())}


def from_cli(url: str, text: str) -> Objects:
    """The normalized objects of the CLI's JSON answer."""
    scheme, _, prefix = split(url)
    data = json.loads(text or "null")
    if scheme == "gs":
        rows = [(o["name"], o["generation"], o["size"]) for o in data or []]
    else:
        rows = [(o["Key"], o["ETag"], o["Size"]) for o in (data or {}).get("Contents", [])]
    return {rel: {"version": str(version), "size": int(size)}
            for key, version, size in rows if (rel := _kept(str(key), prefix))}


def record(url: str, directory: Path) -> int:
    try:
        argv = cli_argv(url)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s(), check=False, env=cli_env(url))
        if proc.returncode:
            raise RuntimeError(f"`{' '.join(argv)}` exited {proc.returncode}: "
                               + (proc.stderr.strip().splitlines() or ["no message"])[-1])
        objects = from_cli(url, proc.stdout)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, IndexError, subprocess.TimeoutExpired) as err:
        print(f"objects: warning: no {RECORD} for {directory} ({err}); the next launch runs its CPU step "
              "again", file=sys.stderr)
        return 0
    text = json.dumps({"url": url, "objects": objects}, indent=1, sort_keys=True) + "\n"
    tmp = directory / f".{RECORD}.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(directory / RECORD)
    print(f"objects: {len(objects)} object versions of {url} recorded in {directory}/{RECORD}")
    return 0


# ---------------------------------------------------------------- the launcher: the cloud's client


LOOK_THREAD = "objects-look"  # the name of each of look's threads
_MAKING = threading.Lock()  # boto3 makes sessions unsafely across threads (boto/boto3#1592); `look` asks at once


def _client(scheme: str, clients: dict[str, Any], limit: float, here_only: bool = False) -> Any:
    """The store's own client, made once per check (a fresh session: credentials as they are now).
    here_only: credentials from the environment and files alone, no instance metadata asked."""
    with _MAKING:
        return clients[scheme] if scheme in clients else clients.setdefault(scheme, _new_client(scheme, limit, here_only))


def _new_client(scheme: str, limit: float, here_only: bool) -> Any:
    if scheme == "gs":
        from google.cloud import storage  # type: ignore[import-untyped]  # what SkyPilot's gcp extra brings

        return storage.Client()
    import boto3  # type: ignore[import-untyped]  # what SkyPilot's aws extra brings
    import botocore.session  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    core = botocore.session.Session(profile=R2_PROFILE if scheme == "r2" else None)
    if scheme == "r2":
        core.set_config_variable("credentials_file", str(Path(R2_CREDENTIALS).expanduser()))
    if here_only:  # the plan's look: each of these asks a metadata endpoint over the network
        for provider in ("container-role", "iam-role"):
            core.get_component("credential_provider").remove(provider)
    where = {"endpoint_url": r2_endpoint(), "region_name": "auto"} if scheme == "r2" else {}
    return boto3.session.Session(botocore_session=core).client("s3", config=Config(
        connect_timeout=limit, read_timeout=limit, retries={"max_attempts": 1 if here_only else 2}), **where)


def listing(url: str, clients: dict[str, Any] | None = None, limit: float | None = None,
            here_only: bool = False) -> tuple[Objects, dict[str, Any] | None]:
    """(the objects under URL's prefix, the record stored there or None), asked with the store's own
    Python client (lazy import); raises what the client raises (no credentials, no bucket, ...)."""
    scheme, bucket, prefix = split(url)
    limit = timeout_s() if limit is None else limit
    client = _client(scheme, {} if clients is None else clients, limit, here_only)
    objects: Objects = {}
    if scheme in ("s3", "r2"):
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                if rel := _kept(o["Key"], prefix):
                    objects[rel] = {"version": str(o["ETag"]), "size": int(o["Size"])}
        try:
            body = client.get_object(Bucket=bucket, Key=prefix + RECORD)["Body"].read()
        except client.exceptions.NoSuchKey:
            return objects, None
        return objects, json.loads(body)
    objects = {rel: {"version": str(b.generation), "size": int(b.size)}
               for b in client.list_blobs(bucket, prefix=prefix, timeout=limit) if (rel := _kept(b.name, prefix))}
    blob = client.bucket(bucket).get_blob(prefix + RECORD, timeout=limit)
    return objects, json.loads(blob.download_as_bytes(timeout=limit)) if blob is not None else None


def compare(*urls: str, clients: dict[str, Any] | None = None, limit: float | None = None,
            here_only: bool = False) -> tuple[int | None, str]:
    """(N, "") when the N objects under the URLs are the ones their records list; else (None, why)
    for the first URL that differs. One client per store for all of them (`clients`: made here)."""
    clients = {} if clients is None else clients
    total = 0
    for url in urls:
        try:
            objects, recorded = listing(url, clients, limit, here_only)
        except ImportError as err:
            return None, f"not checked: no client for {url} here ({err.name or err})"
        except Exception as err:  # noqa: BLE001 - credentials, network, a missing bucket: all mean "run the step"
            said = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            if "Credentials" in type(err).__name__:  # botocore's NoCredentialsError, google.auth's
                return None, f"not checked: no credentials for {url} here ({said})"
            return None, f"not checked: could not list {url}: {said}"
        if recorded is None:
            return None, f"no {RECORD} under {url} (never prepared there, or by an older rlaunch)"
        want = recorded.get("objects") if isinstance(recorded, dict) else None
        if not isinstance(want, dict) or not want:
            return None, f"{url}/{RECORD} lists no objects"
        changed = sorted(set(want) ^ set(objects) | {k for k in set(want) & set(objects) if want[k] != objects[k]})
        if changed:
            return None, (f"{len(changed)} object(s) under {url} differ from what the CPU step recorded "
                          f"(first: {changed[0]})")
        total += len(objects)
    return total, ""


def credentials_here(scheme: str) -> str:
    """"" when this machine's environment or files hold credentials for the store, else a hint (the
    same on every machine). Reads no file's content, asks nothing: the plan's first, instant answer."""
    env, home = os.environ, Path.home()
    if scheme == "gs":
        adc = Path(env.get("CLOUDSDK_CONFIG") or home / ".config" / "gcloud") / "application_default_credentials.json"
        found = env.get("GOOGLE_APPLICATION_CREDENTIALS") or adc.is_file()
        return "" if found else "`gcloud auth application-default login` makes them"
    if scheme == "r2":
        found = all(Path(f).expanduser().is_file() for f in (R2_CREDENTIALS, R2_ACCOUNT_ID))
        return "" if found else f"{R2_CREDENTIALS} and {R2_ACCOUNT_ID}: `sky check r2` says how"
    named = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
             "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    files = [Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials"),
             Path(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config")]
    if any(env.get(n) for n in named) or any(f.is_file() for f in files):
        return ""
    return "`aws configure` makes them; an instance role is asked by make launch alone"


def _answer(answers: dict[int, tuple[int | None, str]], i: int, url: str, limit: float,
            clients: dict[str, Any]) -> None:
    answers[i] = compare(url, clients=clients, limit=limit, here_only=True)


def look(urls: list[str], deadline_s: float) -> list[tuple[int | None, str]]:
    """`make plan`'s question, compare(url) for each URL at once, with the credentials found here alone:
    its answers in order. Never raises, never writes, never waits past the one deadline (a listing
    still going on then is left to its daemon thread)."""
    answers: dict[int, tuple[int | None, str]] = {}
    clients: dict[str, Any] = {}  # one per store, made once (under _MAKING), shared: a client is thread-safe
    asking = []
    for i, url in enumerate(urls):
        missing = credentials_here(split(url)[0])
        if missing:
            answers[i] = (None, f"not checked: no credentials for {url} here ({missing})")
            continue
        asking.append(threading.Thread(target=_answer, args=(answers, i, url, deadline_s, clients), daemon=True,
                                       name=f"{LOOK_THREAD} {url}"))
        asking[-1].start()
    end = time.monotonic() + deadline_s
    for thread in asking:
        thread.join(max(0.0, end - time.monotonic()))
    return [answers.get(i, (None, f"not checked: no answer for {url} within {deadline_s:g} s"))
            for i, url in enumerate(urls)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "record":
        print(__doc__.split("Usage")[1].split("Env:")[0].strip(), file=sys.stderr)
        return 2
    return record(args[1], Path(args[2]))


if __name__ == "__main__":
    sys.exit(main())
