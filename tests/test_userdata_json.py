"""decode-userdata on what the AWS CLI prints by default: JSON strings and whole get-template answers."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from amibuild.errors import NotUserData
from amibuild.handoff.userdata import decode as userdata_decode

DATA = Path(__file__).resolve().parent / "data" / "userdata"
TEMPLATE = (DATA / "cfn-launch-template.yaml").read_text()
WHERE = "Resources.NodeLaunchTemplate.Properties.LaunchTemplateData.UserData"


def test_decodes_the_json_quoted_template_body_get_template_query_prints():
    # `aws cloudformation get-template --stack-name S --query TemplateBody` on a YAML template:
    # one JSON string, newlines escaped, ending in a newline of its own.
    printed = json.dumps(TEMPLATE) + "\n"
    assert printed.startswith('"') and "\\n" in printed

    parts = userdata_decode.decode(printed.encode(), "template.json")

    assert [p.content_type for p in parts] == ["text/x-shellscript"]
    assert parts[0].via == ("JSON string", WHERE, "CloudFormation references: ClusterName AWS::StackName AWS::Region")
    assert "/etc/eks/bootstrap.sh ${ClusterName}\n" in parts[0].body


def test_decodes_a_json_quoted_base64_user_data_string():
    script = (DATA / "plain-shell.sh").read_text()
    printed = json.dumps(base64.b64encode(script.encode()).decode())

    parts = userdata_decode.decode(printed.encode())

    assert parts == [userdata_decode.Part("text/x-shellscript", script, via=("JSON string", "base64"))]


def test_decodes_a_whole_get_template_answer_with_a_yaml_body():
    answer = json.dumps({"TemplateBody": TEMPLATE, "StagesAvailable": ["Original", "Processed"]}, indent=4)

    parts = userdata_decode.decode(answer.encode())

    assert parts[0].via == ("TemplateBody", WHERE, "CloudFormation references: ClusterName AWS::StackName AWS::Region")
    assert "/etc/eks/bootstrap.sh ${ClusterName}\n" in parts[0].body


@pytest.mark.parametrize("data", [b'"not user data at all"', b'"\\u0000\\u0001"', b'"unterminated'])
def test_a_json_string_holding_no_user_data_is_refused_with_one_line(data):
    with pytest.raises(NotUserData) as caught:
        userdata_decode.decode(data, "answer.json")
    assert str(caught.value).startswith("answer.json: not user data")
    assert "\n" not in str(caught.value)
