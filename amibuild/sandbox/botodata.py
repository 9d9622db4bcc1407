"""The emulator child parses botocore's big JSON files once, not once per boto3 Session.

moto makes a fresh boto3 Session in many places (every EKS CreateCluster / CreateNodegroup asks
one for the partitions, to check a role ARN; EC2 reads its service model at import in several
modules), and each Session's loader parses ``endpoints.json`` (~1 MB) or the EC2 model again:
14 parses of ``endpoints.json`` in a start-up and its first reset, ~0.3 s each on a quiet
2-CPU machine and several times that under load. Here the child shares the parsed
``endpoints`` and ``service-2`` documents between loaders.

Sharing is safe for these: botocore reads them, and the one change it makes to a service model
(merging its ``sdk-extras`` file) gives the same document however often it is applied. Only the
emulator process does this (`_serve`); amibuild's own AWS calls never go through here.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import boto3
from botocore.loaders import JSONFileLoader

_SHARED = ("endpoints", "service-2")


def parse_once() -> None:
    """Share the parsed endpoints and service models between botocore loaders (idempotent)."""
    original = JSONFileLoader.load_file
    if getattr(original, "_amibuild_shared", False):
        return
    parsed: dict[str, Any] = {}
    lock = threading.Lock()

    def load_file(loader: Any, file_path: str) -> Any:
        if os.path.basename(file_path) not in _SHARED:
            return original(loader, file_path)
        with lock:
            if file_path not in parsed:
                parsed[file_path] = original(loader, file_path)
            return parsed[file_path]

    load_file._amibuild_shared = True  # type: ignore[attr-defined]
    JSONFileLoader.load_file = load_file  # type: ignore[method-assign]


def one_session_for_eks() -> None:
    """moto's EKS makes a new boto3 Session for every CreateCluster and CreateNodegroup (to read the
    partitions a role ARN may name), and botocore registers its handlers anew for each: ~12 ms, on
    every seed of a region. One Session, made here, answers them all (the same partitions)."""
    from moto.eks import utils

    session = boto3.Session()
    utils.Session = lambda: session  # type: ignore[assignment]
