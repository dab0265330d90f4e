"""The storage's own versions of prepared inputs: recorded on the node, compared by the launcher.

At the end of SkyPilot's CPU step, on its node (which has the bucket's credentials and the cloud's
CLI), `record` lists the objects under an input directory's prefix with that CLI and writes
SHA256SUMS.objects beside SHA256SUMS: each object's size and version (generation on GCS, ETag on S3).
Before the next CPU step, the launcher lists the same prefix with the cloud's own Python client
(`listing`: boto3, google-cloud-storage, the clients SkyPilot itself uses for those stores) and
compares it with the record (`compare`): equal, and the inputs are what that step prepared and
verified, so the step is skipped. Anything else (no client, no credentials, a changed object, an
error) makes the step run, as before, with the reason said.

Usage (on the node; never fails the step, a record it cannot write is only a warning):
    python -m rlaunch.job.objects record URL DIR     URL: gs://BUCKET/PREFIX or s3://BUCKET/PREFIX

Env:
    RLAUNCH_OBJECTS_TIMEOUT_S  seconds one listing may take, on the node or the launcher (default 60)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RECORD = "SHA256SUMS.objects"
STORES = {"gs": "gcs", "s3": "s3"}  # URL scheme -> store; others (azure, r2, ...) are not recorded
Objects = dict[str, dict[str, Any]]  # key relative to the prefix -> {"version": str, "size": int}


def timeout_s() -> float:
    raw = os.environ.get("RLAUNCH_OBJECTS_TIMEOUT_S", "60")
    return float(raw) if raw.replace(".", "", 1).isdigit() and float(raw) > 0 else 60.0


def split(url: str) -> tuple[str, str, str]:
    """(scheme, bucket, prefix ending in '/') of gs://BUCKET/PREFIX or s3://BUCKET/PREFIX."""
    scheme, _, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme not in STORES or not bucket or not rest:
        raise ValueError(f"{url!r}: not gs://BUCKET/PREFIX or s3://BUCKET/PREFIX")
    return scheme, bucket, prefix.strip("/") + "/" if prefix.strip("/") else ""


def _kept(key: str, prefix: str) -> str:
    """The key relative to the prefix; "" for the record itself and for the prefix's own placeholder."""
    rel = key[len(prefix):]
    return "" if rel in ("", RECORD) else rel


# ---------------------------------------------------------------- the node: the cloud's CLI


def cli_argv(url: str) -> list[str]:
    scheme, bucket, prefix = split(url)
    if scheme == "gs":
        return ["gcloud", "storage", "objects", "list", f"gs://{bucket}/{prefix}**", "--format=json"]
    return ["aws", "s3api", "list-objects-v2", "--bucket", bucket, "--prefix", prefix, "--output", "json"]


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
    argv = cli_argv(url)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s(), check=False)
        if proc.returncode:
            raise RuntimeError(f"`{' '.join(argv)}` exited {proc.returncode}: "
                               + (proc.stderr.strip().splitlines() or ["no message"])[-1])
        objects = from_cli(url, proc.stdout)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as err:
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


def _client(scheme: str, clients: dict[str, Any]) -> Any:
    """The store's own client, made once per check (a fresh session: credentials as they are now)."""
    if scheme not in clients:
        limit = timeout_s()
        if scheme == "s3":
            import boto3  # type: ignore[import-untyped]  # what SkyPilot's aws extra brings
            from botocore.config import Config  # type: ignore[import-untyped]

            clients[scheme] = boto3.session.Session().client("s3", config=Config(
                connect_timeout=limit, read_timeout=limit, retries={"max_attempts": 2}))
        else:
            from google.cloud import storage  # type: ignore[import-untyped]  # what SkyPilot's gcp extra brings

            clients[scheme] = storage.Client()
    return clients[scheme]


def listing(url: str, clients: dict[str, Any] | None = None) -> tuple[Objects, dict[str, Any] | None]:
    """(the objects under URL's prefix, the record stored there or None), asked with the store's own
    Python client (lazy import); raises what the client raises (no credentials, no bucket, ...)."""
    scheme, bucket, prefix = split(url)
    client, limit = _client(scheme, {} if clients is None else clients), timeout_s()
    objects: Objects = {}
    if scheme == "s3":
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


def compare(*urls: str, clients: dict[str, Any] | None = None) -> tuple[int | None, str]:
    """(N, "") when the N objects under the URLs are the ones their records list; else (None, why)
    for the first URL that differs. One client per store for all of them (`clients`: made here)."""
    clients = {} if clients is None else clients
    total = 0
    for url in urls:
        try:
            objects, recorded = listing(url, clients)
        except ImportError as err:
            return None, f"no client for {url} here ({err.name or err})"
        except Exception as err:  # noqa: BLE001 - credentials, network, a missing bucket: all mean "run the step"
            return None, f"could not list {url}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "record":
        print(__doc__.split("Usage")[1].split("Env:")[0].strip(), file=sys.stderr)
        return 2
    return record(args[1], Path(args[2]))


if __name__ == "__main__":
    sys.exit(main())
