"""The test-ami job: boot one variant's image, run its checks through SSM, terminate it, tag the
image, sign the test statement and keep the record; and build-ami's --boot-test settings."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from amibuild import notify, tags
from amibuild.attest import sign as attest_sign
from amibuild.aws import Aws, Image, fan_out
from amibuild.bake.build_plan import new_run_id
from amibuild.channels import evidence, known
from amibuild.errors import AmibuildError, Interrupted, SpecError
from amibuild.handoff import testnode
from amibuild.imagetest import boot, kube
from amibuild.imagetest.statements import says_something, test_statement
from amibuild.jobs import env as envs
from amibuild.jobs.env import Env, Scope
from amibuild.jobs.requests_build import TestAmiRequest
from amibuild.jobs.shown import Shown
from amibuild.jobs.signals import Signals
from amibuild.pipeline import Pipeline, iam_names, imagetests
from amibuild.pipeline.naming import parameter_name
from amibuild.pipeline.options import Options, load_pipeline
from amibuild.pipeline.value_checks import AMI_ID

# what test-ami says on SIGINT / SIGTERM / SIGHUP (`jobs.signals.Signals` holds them): the test stops
# at its next poll and terminates its instance, and a second signal does not skip that
BOOT_TEST_SIGNALS = ("stopping the boot test; terminating its instance",
                     "still stopping the boot test; terminating its instance first")


def find_amis(aws: Any, pipeline: Pipeline, variant: Any, *, ami: str | None, run_id: str | None,
              channel: str | None = None) -> dict[str, str]:
    """{region: ami} of the image to test: --ami in the build region (its copies found by fingerprint),
    the images a build run made of the variant (--run-id), or what the variant's channel holds (--channel)."""
    region = pipeline.build_region
    if sum(bool(v) for v in (ami, run_id, channel)) != 1:
        raise SpecError("test-ami: give --ami ami-... (in the build region), --run-id RUN (`amibuild runs` lists "
                        "them) or --channel CHANNEL (one of them)")
    if channel:
        known.require(aws, pipeline, [variant], known.Asked(channel, "--channel"), every=False)
        name = parameter_name(pipeline, variant, channel)
        held = {r: p.value for r in pipeline.target_regions if (p := aws.find_parameter(name, r)) is not None}
        if region not in held:
            raise SpecError(f"--channel {channel}: channel {channel} of {variant.name} holds no image in {region} "
                            "(the pipeline's build region)")
        return held
    if ami:
        if not AMI_ID.fullmatch(ami):
            raise SpecError(f"--ami {ami!r} is not an AMI id (ami-0123456789abcdef0)")
        image = aws.find_image(region, ami)
        if image is None:
            raise SpecError(f"--ami {ami}: no such image in {region} (the pipeline's build region)")
        fingerprint = image.tags.get(tags.FINGERPRINT, "")
        found = {region: ami}
        if fingerprint:
            found |= {other: sorted(copies, key=lambda c: c[0].creation_date)[-1][0].image_id
                      for other in pipeline.target_regions
                      if other != region and (copies := aws.own_images(other, {f"tag:{tags.FINGERPRINT}": [fingerprint]}))}
        return found
    found = {other: images[0][0].image_id for other in pipeline.target_regions
             if (images := aws.own_images(other, {f"tag:{tags.RUN_ID}": [run_id], f"tag:{tags.VARIANT}": [variant.name]}))}
    if region not in found:
        raise SpecError(f"--run-id {run_id}: no image of variant {variant.name} from that run in {region}")
    return found


def named_by_provenance(amis: Mapping[str, str], region: str, *, built: Mapping[str, str] | None, why: str,
                        images: Mapping[str, Image | None], account: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """Of ``amis`` ({region: ami} `find_amis` found), the images the boot test of ``amis[region]`` may
    name (its tags and signed statement): that one, and each other region's image that its signed
    provenance names as it is today (``built``: `evidence.built_by`; None when it has none valid,
    ``why``); and a line for each image left out, saying why. ``images``: DescribeImages of each now. Pure."""
    kept, left = {region: amis[region]}, []
    for other, ami in sorted(amis.items()):
        if other == region:
            continue
        image = images.get(other)
        if built is None:
            reason = f"the tested image {amis[region]} has no valid signed provenance: {why}"
        elif image is None:
            reason = "it does not exist"
        elif not evidence.names(built, image, account):
            reason = (f"not named by the signed provenance of the tested image {amis[region]} "
                      "(another build, or changed since it was signed)")
        else:
            kept[other] = ami
            continue
        left.append(f"{ami} in {other} left out (not tagged, not in the test statement): {reason}")
    return kept, tuple(left)


def provenance_facts(aws: Any, pipeline: Pipeline, variant: Any,
                     amis: Mapping[str, str]) -> tuple[Mapping[str, str] | None, str, dict[str, Image | None], str]:
    """What `named_by_provenance` decides on: the images a valid signed provenance of the build region's
    image names (from this pipeline, for this variant; None and why when there is none), DescribeImages
    of every image in ``amis``, and the pipeline's account (the same reading as `scan --channel`'s)."""
    region = pipeline.build_region
    images = fan_out(sorted(amis), lambda r: aws.find_image(r, amis[r]))
    booted = images[region]
    if booted is None:
        return None, f"{amis[region]} does not exist in {region}", images, ""
    reader = evidence.Reader(aws, pipeline)
    try:
        found = reader.about(booted)
        account = reader.where.account
    except AmibuildError as exc:
        return None, f"its statements could not be read: {exc}", images, ""
    proof = evidence.provenance_of(found, pipeline.name, variant.name)
    if proof is None:
        return None, evidence.summarise(found, pipeline.name, variant.name).provenance, images, account
    return evidence.built_by(proof), "", images, account


def boot_test_settings(options: Any, *, boot_test: bool, cluster: str | None,
                       read_timeout: float | None = None, poll: float | None = None) -> boot.BootTestSettings | None:
    """build-ami's --boot-test [--cluster C], checked before any AWS work: the pipeline's test { ... }
    block with --cluster over it, the cluster's API (the Kubernetes client and a kubeconfig) opened
    when a cluster is named, and each variant's proxy held to the boot test's rule. Without a
    cluster the user data is rendered here; with one, the job renders it from DescribeCluster
    (`amibuild.handoff.testnode.user_data`) before it builds anything. None without --boot-test."""
    if not boot_test:
        if cluster:
            raise SpecError("--cluster goes with --boot-test: it names the cluster the boot test's nodes join")
        return None
    imagetests.check_cluster(cluster or "", "--cluster")
    pipeline = load_pipeline(options)
    settings = boot.BootTestSettings.of(pipeline.boot_test, cluster=cluster, read_timeout=read_timeout,
                                        poll=poll)
    # no AWS call: a proxy with a password is refused here
    checked = testnode.user_data(None, pipeline.variants, region=pipeline.build_region, cluster="")
    if not settings.cluster:
        return replace(settings, user_data=checked)
    return replace(settings, nodes=kube.Nodes(settings.cluster))


def test_ami(r: TestAmiRequest, env: Env) -> Shown:
    opts = envs.options(env, Scope(r.pipeline, r.variant, profile=r.profile, build_dir=r.build_dir))
    timeout, poll = envs.read_timeout(env), env.platform().poll_seconds  # config amibuild.read_timeout: SendCommand's too
    # SIGINT / SIGTERM / SIGHUP stop the test at its next poll, its instance terminated: `Interrupted`
    with Signals(BOOT_TEST_SIGNALS) as stop:
        try:
            result, record = _run(r, opts, say=env.say, stop=stop, read_timeout=timeout, poll=poll)
        except BaseException:
            if stop.requested():
                raise Interrupted("interrupted: the boot test stopped and its instance was terminated",
                                  stop.exit_code) from None
            raise
    return Shown(result, lines=lambda x: [*boot.report_lines(x), f"record: {record}"])


def _run(r: TestAmiRequest, options: Options, *, say: Any, stop: Signals, read_timeout: float | None, poll: float | None):
    """The boot test of one variant's image; its result, with the record written."""
    pipeline, variant = envs.one_variant(options, "whose image to test")
    imagetests.check_cluster(r.cluster or "", "--cluster")
    if r.instance_profile:
        iam_names.instance_profile(r.instance_profile, "--instance-profile")
    settings = boot.BootTestSettings.of(
        pipeline.boot_test, cluster=r.cluster, subnet_id=r.subnet, security_group_id=r.security_group,
        instance_profile=r.instance_profile, instance_type=r.instance_type, read_timeout=read_timeout, timeout=r.timeout,
        poll=poll)
    # the cluster's API through the caller's kubeconfig: a missing client or kubeconfig is said before any AWS work
    nodes = kube.Nodes(settings.cluster) if settings.cluster else None
    # the variant's proxy refused (a password in it) before any AWS work
    testnode.user_data(None, [variant], region=pipeline.build_region, cluster="")
    aws = Aws(profile=options.profile, region=pipeline.build_region)
    amis = find_amis(aws, pipeline, variant, ami=r.ami, run_id=r.run_id, channel=r.channel)
    attestor = attest_sign.attestor(aws, pipeline, say)
    left_out: tuple[str, ...] = ()
    if attestor is not None and attestor.signer.usable and len(amis) > 1:
        # the pipeline signs: another region's image is named (tagged, in the statement) only when the booted
        # image's signed provenance names it; without a key nothing signed vouches for it and no gate takes it
        built, why, images, account = provenance_facts(aws, pipeline, variant, amis)
        amis, left_out = named_by_provenance(amis, pipeline.build_region, built=built, why=why, images=images,
                                             account=account)
    settings = replace(settings, user_data=testnode.user_data(aws, [variant], region=pipeline.build_region,
                                                              cluster=settings.cluster))
    test_run = new_run_id()
    result = boot.boot_test(aws, variant=variant, amis=amis, region=pipeline.build_region, run_id=test_run,
                            settings=settings, cancelled=stop.requested, say=say, nodes=nodes)
    result = replace(result, notes=(*left_out, *result.notes))
    tested = result.to_dict()
    if not stop.requested() and says_something(tested):  # the test statement, about the image in every region
        if attestor is not None:
            stored = test_statement(attestor, tested, amis)
            say(stored.line())
            tested["statement"] = stored.to_dict()
    if pipeline.events and not stop.requested():
        notify.send(aws, pipeline.events, [notify.schema.test_result(result.to_dict(), pipeline=pipeline.name)],
                    region=pipeline.build_region, say=say)
    path = Path(options.build_dir) / "tests" / test_run / f"{variant.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(tested, indent=2) + "\n", encoding="utf-8")
    return result, path
