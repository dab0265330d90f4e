"""Can the cluster pull the run's image? Asked of the registry before anything is applied.

A KubeRay launch of an image no registry has leaves its pods in ImagePullBackOff until a
deadline; the rlaunch images (ghcr.io/rlaunch/rlaunch-<framework>:<version>) are built by
`make image-build`, and no registry publishes them. So launch asks the registry for the image's
manifest first, with the user's own container client and so the user's own registry credentials
(its login; no credential passes through rlaunch): skopeo, crane, docker or podman, the first on
PATH, or RLAUNCH_IMAGE_CLIENT. The cluster's nodes may hold other credentials (imagePullSecrets);
this check answers for the user's, which `make image-push` used.

Exit 3 (MissingPrerequisite) when the manifest cannot be read, naming `make image-push REGISTRY=`.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from rlaunch.errors import MissingPrerequisite

# client -> argv (after the program) that reads REF's manifest from its registry, without a pull
CLIENTS = {
    "skopeo": ["inspect", "--raw", "docker://{ref}"],
    "crane": ["manifest", "{ref}"],
    "docker": ["manifest", "inspect", "{ref}"],
    "podman": ["manifest", "inspect", "docker://{ref}"],
}
TIMEOUT_S = 60


def client() -> str:
    """The container client that asks: RLAUNCH_IMAGE_CLIENT, else the first of CLIENTS on PATH."""
    chosen = os.environ.get("RLAUNCH_IMAGE_CLIENT", "")
    if chosen:
        if chosen not in CLIENTS:
            raise MissingPrerequisite(f"the container client RLAUNCH_IMAGE_CLIENT={chosen}",
                                      f"set it to one of {', '.join(CLIENTS)}")
        if not shutil.which(chosen):
            raise MissingPrerequisite(f"{chosen} (RLAUNCH_IMAGE_CLIENT)", f"install {chosen} or unset it")
        return chosen
    found = next((name for name in CLIENTS if shutil.which(name)), "")
    if not found:
        raise MissingPrerequisite("a container client to check that the image can be pulled",
                                  "install skopeo, crane, docker or podman, logged in to the image's registry")
    return found


def require_pullable(image: str, framework: str, kind: str, accelerator: str = "") -> str:
    """One line saying the registry has `image`; else MissingPrerequisite naming how to get it there."""
    name = client()
    argv = [name, *(a.format(ref=image) for a in CLIENTS[name])]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        result = subprocess.CompletedProcess(argv, 124, "", f"no answer in {TIMEOUT_S} s")
    if result.returncode == 0:
        return f"image {image}: its registry has it ({' '.join(argv[:-1])})"
    said = next((ln.strip() for ln in reversed(result.stderr.splitlines()) if ln.strip()), f"exit {result.returncode}")
    if kind == "rlaunch":
        acc = f" ACCELERATOR={accelerator}" if accelerator else ""  # one with an image of its own (GB200)
        how = (f"build and push it, then launch from there: make image-build image-push FRAMEWORK={framework}{acc} "
               f"REGISTRY=<a registry you can push to>, then make launch ... REGISTRY=<the same>")
    else:
        how = f"log {name} in to its registry, or use another image (IMAGE=)"
    raise MissingPrerequisite(f"the image {image}, which the pods pull ({name}: {said})", how)
