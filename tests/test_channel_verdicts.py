"""What a failed channel write says afterwards (issue 29): read from every region, not remembered.

The emulator over real HTTP with tests/faultproxy.py in front of it (a failing region).
"""

from __future__ import annotations

import pytest

from amibuild.errors import PublishFailed
from test_publish import build, ceph, current, do_publish, pipeline, pipeline_file, proxy  # noqa: F401


def test_an_unwind_over_a_split_channel_says_it_is_split_not_whole(proxy, pipeline, ceph):  # noqa: F811
    old, theirs, new = build("fp1"), build("fp3"), build("fp2")
    # another writer's partial write: eu-west-1 moved to fp3, us-west-2 left on fp1
    do_publish(pipeline, ceph, {"us-west-2": old["us-west-2"], "eu-west-1": theirs["eu-west-1"]}, allow_foreign=True)
    proxy.fail("eu-west-1", name="/image_id")
    with pytest.raises(PublishFailed) as caught:
        do_publish(pipeline, ceph, new)
    message = str(caught.value)
    # put back where it was, and the verdict is what the regions hold now: split, as before
    assert current("recommended", "us-west-2") == old["us-west-2"]
    assert current("recommended", "eu-west-1") == theirs["eu-west-1"]
    assert "nothing is left half moved" not in message, message
    assert "SPLIT" in message and "amibuild channels --repair" in message, message
    assert f"us-west-2 holds {old['us-west-2']}" in message and f"eu-west-1 holds {theirs['eu-west-1']}" in message


def test_an_unwind_over_a_whole_channel_says_it_is_whole_naming_what_each_region_holds(proxy, pipeline,  # noqa: F811
                                                                                       ceph):  # noqa: F811
    old, new = build("fp1"), build("fp2")
    do_publish(pipeline, ceph, old)
    proxy.fail("eu-west-1", name="/image_id")
    with pytest.raises(PublishFailed) as caught:
        do_publish(pipeline, ceph, new)
    message = str(caught.value)
    assert "nothing is left half moved" in message and "SPLIT" not in message, message
    assert f"us-west-2 holds {old['us-west-2']}" in message and f"eu-west-1 holds {old['eu-west-1']}" in message
