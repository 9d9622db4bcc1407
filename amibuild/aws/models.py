"""botocore's service models: parsed once per process, and ahead of time when a job knows it will
need them.

Each boto3 Session has a loader of its own, and the loader parses a service's JSON model the first
time one of its clients is made: EC2's (~4 MB) takes ~0.12 s, SSM's ~0.04 s, on a quiet 2-CPU
machine, for every gateway (`Aws`) a process makes. What a loader reads depends only on its search
paths (botocore's data, boto3's, any `data_path` in the AWS config), so every session whose loader
would search the same paths shares one (`share_loader`): a second `Aws` in the process, or a test's
hundredth, parses nothing again. Sharing is what one session making many clients does anyway.

`preload` parses the models a job is about to need in a background thread, while the job waits on
something else (`build-ami` waits for `packer version`). It makes throwaway clients with dummy
credentials, so it never runs the credential chain and never sends a request; what fails there is
left for the real client to report. `wait_for_preload` (the gateway calls it before it imports
boto3 itself) keeps the two threads from importing botocore at the same time.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

_lock = threading.Lock()
_loaders: dict[tuple[str, ...], Any] = {}  # search paths -> the process's loader for them
_preloading: threading.Thread | None = None


def share_loader(boto_session: Any) -> None:
    """Give a new boto3 Session (before its first client) the process's loader for its search paths."""
    core = boto_session._session
    own = core.get_component("data_loader")
    key = tuple(own.search_paths)
    with _lock:
        shared = _loaders.setdefault(key, own)
    if shared is not own:
        core.register_component("data_loader", shared)
        boto_session._loader = shared  # boto3 keeps its own reference (for resources)


def preload(profile: str | None, clients: Sequence[tuple[str, str]]) -> None:
    """Start parsing the models of these (service, region) clients in the background."""
    global _preloading

    def work() -> None:
        try:
            import boto3

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
