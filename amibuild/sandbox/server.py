"""The emulator process itself: moto's WSGI app behind our control endpoints (`_SandboxApp`),
`_serve` (seed, bind, report the port, serve), and `main` (``python -m amibuild.sandbox``)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

from amibuild.errors import AmibuildError
from amibuild.sandbox import SandboxError
from amibuild.sandbox.botodata import one_session_for_eks, parse_once
from amibuild.sandbox.moto_check import check_internals
from amibuild.sandbox.seed import API_PREFIX, LOOPBACK, SEED_REGIONS, Seeder, seed_images
from amibuild.sandbox.eks_cluster import model_eks_clusters, read_short_form_yaml
from amibuild.sandbox.patches import (keep_image_data_types, list_actions_once, list_services_once, model_stack_updates,
                                      page_parameter_listings, read_one_resources_tags, tag_stack_groups)
from amibuild.sandbox import (cross_account, clock as clock_mod, eks_api, image_states, inspector_api, kms_signing, kms_accounts,
                              kms_hmac, paging, recyclebin, runcommand, standins)
from amibuild.sandbox.kubeapi import CONTROL as KUBE_CONTROL, PREFIX as KUBE_PREFIX, KubeApi
from amibuild.sandbox.process import CHILD_PREFIX, EXIT_REFUSED, serve_foreground
from amibuild.sandbox.touched import EVERYTHING, Touched, reset_regions


_StartResponse = Callable[..., Any]


class _SandboxApp:
    """WSGI middleware: our control endpoints, everything else to moto."""

    def __init__(self, moto_app: Any, seeder: Seeder, clock: clock_mod.Clock | None = None) -> None:
        self.moto_app = moto_app
        self.seeder = seeder
        self.clock = clock or clock_mod.Clock()  # the time AWS answers with (`amibuild.sandbox.clock`)
        self.touched = Touched()  # the regions clients wrote to since the last reset
        self.kube = KubeApi()  # the sandbox cluster's Kubernetes API (its Nodes)

    def __call__(self, environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
        if (method, path) in (("POST", f"{API_PREFIX}/reset"), ("POST", "/moto-api/reset")):
            return self._answer(start_response, self._reset)
        if (method, path) == ("POST", f"{API_PREFIX}/release"):
            return self._answer(start_response, lambda: self._release(environ))
        if (method, path) == ("GET", f"{API_PREFIX}/health"):
            return self._answer(start_response, lambda: {"regions": list(SEED_REGIONS)})
        if path.startswith(f"{KUBE_PREFIX}/"):
            return self.kube(method, path, lambda status, body: self._json(start_response, status, body),
                             lambda: _body(environ))
        if (method, path) == ("POST", KUBE_CONTROL):
            return self._answer(start_response, lambda: self.kube.control(_body(environ)))
        if path == clock_mod.CONTROL and method in ("GET", "POST"):
            return self._answer(start_response, lambda: self.clock.control(_body(environ) if method == "POST" else {}))
        if path.startswith(f"{API_PREFIX}/"):
            error = {"error": f"no route {method} {path}"}
            return self._json(start_response, "404 Not Found", error)
        if recyclebin.is_rbin(environ):  # Recycle Bin, which moto lacks
            from moto.core import DEFAULT_ACCOUNT_ID

            return recyclebin.serve(environ, DEFAULT_ACCOUNT_ID,
                                    lambda status, body: self._json(start_response, status, body))
        if eks_api.handles(environ):  # EKS access entries and node group version updates, which moto lacks
            from moto.core import DEFAULT_ACCOUNT_ID

            self.touched.note(environ)
            return eks_api.serve(environ, DEFAULT_ACCOUNT_ID,
                                 lambda status, body, headers: self._json(start_response, status, body, headers))
        nodegroup_read = eks_api.is_nodegroup_read(environ)
        if nodegroup_read:  # a node group read sees its update done, as eks_api's DescribeUpdate does
            from moto.core import DEFAULT_ACCOUNT_ID

            eks_api.settle_nodegroup(DEFAULT_ACCOUNT_ID, *nodegroup_read)
        if inspector_api.is_scan(environ):  # Inspector Scan, which moto lacks: reads only, nothing to reset
            return inspector_api.serve(environ, lambda status, body: self._json(start_response, status, body))
        self.touched.note(environ)
        return self.moto_app(environ, start_response)

    def _reset(self) -> dict[str, Any]:
        """Put the seed back where clients wrote since the last reset (`touched`): nothing when
        they only read, the regions they wrote to, or everything."""
        from moto.moto_api._internal.models import moto_api_backend

        self.kube.reset()
        self.clock.reset()
        standins.clear()  # every image goes (or goes back to the seed): so do their stand-ins
        recyclebin.reset()
        with self.seeder.lock:
            regions = self.touched.take()
            if EVERYTHING in regions or not regions <= set(SEED_REGIONS):
                moto_api_backend.reset()
                self.seeder.seed()
                regions = set(SEED_REGIONS)
            elif regions:
                reset_regions(regions)
                self.seeder.seed(sorted(regions), full=False)
        return {"status": "ok", "reset": sorted(regions)}

    def _release(self, environ: dict[str, Any]) -> dict[str, Any]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            body = json.loads(environ["wsgi.input"].read(length) or b"{}")
            args = (str(body["k8s"]), str(body.get("os", "al2")), str(body.get("arch", "x86_64")))
        except (ValueError, KeyError, TypeError) as exc:
            raise SandboxError(f"release wants JSON with k8s, os, arch: {exc}") from exc
        with self.seeder.lock:
            image = self.seeder.release(*args, body.get("release"))
            self.touched.add(EVERYTHING)  # every region, and the seeder's own list of releases
        return {
            "image_id": image.image_id,
            "name": image.name,
            "parameter": f"{image.parameter_prefix}/image_id",
            "regions": list(SEED_REGIONS),
        }

    def _answer(
        self, start_response: _StartResponse, action: Callable[[], dict[str, Any]]
    ) -> Iterable[bytes]:
        try:
            return self._json(start_response, "200 OK", action())
        except SandboxError as exc:
            return self._json(start_response, "400 Bad Request", {"error": str(exc)})

    @staticmethod
    def _json(start_response: _StartResponse, status: str, body: dict[str, Any],
              extra: dict[str, str] | None = None) -> Iterable[bytes]:
        data = json.dumps(body).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *(extra or {}).items()]
        start_response(status, headers)
        return [data]



def _body(environ: dict[str, Any]) -> dict[str, Any]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    try:
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
    except ValueError as exc:
        raise SandboxError(f"a JSON object is expected: {exc}") from exc
    if not isinstance(body, dict):
        raise SandboxError("a JSON object is expected")
    return body


def _serve(host: str, port: int, watch_stdin: bool) -> None:
    """The child process: seed moto, bind, report the port on stdout, serve until told to stop."""
    with tempfile.TemporaryDirectory(prefix="amibuild-sandbox-") as scratch:
        amis_path = Path(scratch, "amis.json")
        amis_path.write_text(json.dumps([image.to_moto() for image in seed_images()]))
        # moto reads the file when its EC2 models are imported, and only checks the variable after.
        os.environ["MOTO_AMIS_PATH"] = str(amis_path)
        parse_once()  # before moto's imports: they parse botocore's EC2 model several times
        # moto's CloudFormation imports API Gateway, which imports jsonschema, whose IRI format check
        # builds a grammar at import when rfc3987-syntax is installed (over a second of CPU). No call
        # the emulator answers checks that format; without the module jsonschema leaves the check out.
        sys.modules.setdefault("rfc3987_syntax", None)
        # imports moto.ec2.models (reading the file) and every other moto module used here; a moto
        # that moved what we patch or import fails now, naming it
        check_internals()
    one_session_for_eks()
    model_stack_updates()
    tag_stack_groups()  # after: it wraps the update model_stack_updates installs
    page_parameter_listings()
    keep_image_data_types()  # an overwrite never changes a parameter to or from aws:ec2:image, as on AWS
    read_one_resources_tags()  # an image's tags without a scan of the region's every tag
    list_services_once()  # the dispatcher's list of moto's services, made once
    list_actions_once()  # each response class's actions, listed once
    clock = clock_mod.Clock()
    clock_mod.install(clock)  # SSM stamps its times from the emulator's clock, which a test can move
    recyclebin.use_clock(clock.now)  # protection cooldowns and the bin's retention follow it too
    runcommand.install()  # the SSM agent of boot-test instances
    image_states.install()  # deregistration protection, deprecation, disabled images, the Recycle Bin's EC2 side
    cross_account.install()  # after: images shared across accounts, Allowed AMIs, block public access
    paging.install()  # after accounts: DescribeInstances / DescribeImages paged by item, as AWS does
    kms_signing.install()  # KMS Sign / Verify with AWS's limits (RAW at most 4,096 bytes, DIGEST pre-hashed)
    kms_hmac.install()  # GenerateMac / VerifyMac as AWS answers them
    kms_accounts.install()  # after kms: keys across accounts and regions, key policies and grants, as AWS answers
    standins.install()  # an image's stand-in goes when its last image is deregistered
    model_eks_clusters()
    read_short_form_yaml()

    import logging

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request in the log
    seeder = Seeder()
    app = _SandboxApp(DomainDispatcherApplication(create_backend_app), seeder, clock)
    # Bind first (a taken port fails fast), seed, then report the port: nobody knows it before.
    server = make_server(host, port, app, threaded=True,
                         request_handler=clock_mod.dated_handler(MotoRequestHandler, clock))
    seeder.seed()

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if watch_stdin:
        stdin_fd = sys.stdin.fileno()

        def watch() -> None:
            # Raw reads: a daemon thread blocked inside sys.stdin's buffered reader makes the
            # interpreter abort at shutdown ("could not acquire lock for <stdin>").
            while os.read(stdin_fd, 4096):
                pass  # EOF: the parent closed the pipe or died
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, name="parent-watch", daemon=True).start()

    sys.stdout.write(f"AMIBUILD_SANDBOX_PORT={server.server_port}\n")
    sys.stdout.flush()
    # The parent stops reading stdout now: send anything printed later to the stderr log.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        server.serve_forever()
    except SystemExit:
        pass  # SIGTERM / SIGINT / stdin EOF: a normal stop
    finally:
        server.server_close()
    sys.stderr.flush()
    # Nothing here needs finalizing, and tearing down moto's many objects takes ~0.4 s.
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """``python -m amibuild.sandbox [--port N]`` runs in the foreground; ``serve`` is the child."""
    parser = argparse.ArgumentParser(
        prog="python -m amibuild.sandbox", description="Run the local AWS emulator (moto, seeded)."
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)"
    )
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the emulator process itself (used by Sandbox)")
    serve.add_argument("--port", type=int, default=0, dest="serve_port")
    serve.add_argument("--watch-stdin", action="store_true", help="exit when stdin closes")
    args = parser.parse_args(argv)
    if args.command == "serve":
        try:
            _serve(LOOPBACK, args.serve_port, args.watch_stdin)
        except SandboxError as exc:  # e.g. a moto without what we patch: one line for the parent
            print(f"{CHILD_PREFIX}{exc}", file=sys.stderr, flush=True)
            return EXIT_REFUSED
        return 0
    try:
        serve_foreground(port=args.port)
    except AmibuildError as exc:
        print(f"amibuild sandbox: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # Ctrl-C while still starting
        return 130
    return 0

