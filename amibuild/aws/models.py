"""botocore's service models: parsed once per process, and ahead of time when a job knows it will
need them.

Each boto3 Session has a loader of its own, and the loader parses a service's JSON model the first
time one of its clients is made: EC2's (~4 MB) takes ~0.12 s, SSM's ~0.04 s, on a quiet 2-CPU
machine, for every gateway (`Aws`) a process makes. What a loader reads depends only on its search
paths (botocore's data, boto3's, any `data_path` in the AWS config), so every session whose loader
would search the same paths shares one (`share_loader`): a second `Aws` in the process, or a test's
hundredth, parses nothing again. Sharing is what one session making many clients does anyway.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import os
import threading
from typing import Any, Iterator, Sequence

import boto3
from botocore.loaders import create_loader

_lock = threading.Lock()
_loaders: dict[tuple[str, ...], Any] = {}  # search paths -> the process's loader for them
_preloading: threading.Thread | None = None


class PlainJsonFileLoader:
    """botocore's file loader contract (`exists`, `load_file` of a path without its extension,
    ``.json`` or ``.json.gz``; None when neither is there), parsing into plain dicts."""

    EXTENSIONS = ((".json", open), (".json.gz", gzip.open))

    def exists(self, file_path: str) -> bool:
        return any(os.path.isfile(file_path + ext) for ext, _ in self.EXTENSIONS)

    def load_file(self, file_path: str) -> Any:
        for ext, opener in self.EXTENSIONS:
            if os.path.isfile(file_path + ext):
                with opener(file_path + ext, "rb") as fp:
                    text = fp.read().decode("utf-8")
                with _no_collection():
                    return json.loads(text)
        return None


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """A model's million new objects made without the cyclic collector, then put out of its sight.

    None of them is garbage, and the shared loader keeps them for the life of the process. Made
    with the collector on, they would set off collections that walk every object the process
    holds, and then be walked again on their way through each generation (~0.15 s of a no-change
    build-ami went there). `gc.freeze` moves everything tracked at that moment into the permanent
    generation: reference counting still frees those objects as usual, only a cycle among them
    would stay. Nothing else changes: the collector goes on for everything made afterwards.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def share_loader(boto_session: Any) -> None:
    """Give a new boto3 Session (before its first client) the process's loader for its search paths."""
    core = boto_session._session
    own = core.get_component("data_loader")
    key = tuple(own.search_paths)
    with _lock:
        if key not in _loaders:  # the first of its kind: it parses into plain dicts, and is kept
            own.file_loader = PlainJsonFileLoader()
        shared = _loaders.setdefault(key, own)
    if shared is not own:
        core.register_component("data_loader", shared)
        boto_session._loader = shared  # boto3 keeps its own reference (for resources)


def loader_data(name: str) -> Any:
    """One of botocore's data files (``endpoints``, say) as a loader of this process holds it:
    parsed once, by whichever session asked first; a new loader when no session was made yet."""
    with _lock:
        loader = next(iter(_loaders.values()), None)
    if loader is None:
        loader = create_loader()
        loader.file_loader = PlainJsonFileLoader()
    return loader.load_data(name)


def preload(profile: str | None, clients: Sequence[tuple[str, str]]) -> None:
    """Start parsing the models of these (service, region) clients in the background."""
    global _preloading

    def work() -> None:
        try:
            session = boto3.session.Session(profile_name=profile)
            share_loader(session)
            for service, region in clients:
                session.client(service, region_name=region,
                               aws_access_key_id="preload", aws_secret_access_key="preload")
        except Exception:  # a bad profile or region: the job's own client says so, with context
            pass

    with _lock:
        if _preloading is not None and _preloading.is_alive():
            return
        _preloading = threading.Thread(target=work, name="amibuild-aws-preload", daemon=True)
        _preloading.start()


def wait_for_preload() -> None:
    """Return once a `preload` started earlier has finished (at once when there is none)."""
    with _lock:
        thread = _preloading
    if thread is not None and thread is not threading.current_thread():
        thread.join()
