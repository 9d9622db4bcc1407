"""CloudFormation calls of the gateway, with typed results parsed by amibuild/aws/handoff_results.py."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from botocore.exceptions import ClientError

from amibuild.errors import NotFound
from amibuild.aws import handoff_results as results
from amibuild.aws.error_map import mapped_errors


class CfnCalls:
    """CloudFormation calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def describe_stack(self, name: str, region: str) -> results.Stack | None:
        """The stack (status, parameters, outputs, capabilities); None when it does not exist."""
        try:
            with mapped_errors(f"cloudformation:DescribeStacks {name}", region):
                stacks = self.client("cloudformation", region).describe_stacks(StackName=name)["Stacks"]
        except NotFound:  # "Stack with id NAME does not exist" is a ValidationError
            return None
        return results.parse_stack(stacks[0]) if stacks else None

    def stack_resources(self, name: str, region: str) -> list[results.StackResource]:
        with mapped_errors(f"cloudformation:ListStackResources {name}", region):
            pages = self.client("cloudformation", region).get_paginator("list_stack_resources").paginate(StackName=name)
            return [results.parse_stack_resource(raw) for page in pages for raw in page.get("StackResourceSummaries", [])]

    def stack_template(self, name: str, region: str) -> str:
        """The stack's template as submitted, as text (botocore hands JSON bodies back parsed)."""
        with mapped_errors(f"cloudformation:GetTemplate {name}", region):
            body = self.client("cloudformation", region).get_template(StackName=name, TemplateStage="Original")
        text = body.get("TemplateBody", "")
        return text if isinstance(text, str) else json.dumps(text)

    def create_stack(self, name: str, region: str, *, template_body: str, parameters: Sequence[Mapping[str, Any]],
                     capabilities: Sequence[str], token: str) -> str:
        with mapped_errors(f"cloudformation:CreateStack {name}", region):
            return self.client("cloudformation", region).create_stack(
                StackName=name, TemplateBody=template_body, Parameters=list(parameters),
                Capabilities=list(capabilities), ClientRequestToken=token,
            )["StackId"]

    def create_change_set(self, stack: str, region: str, *, name: str, parameters: Sequence[Mapping[str, Any]],
                          capabilities: Sequence[str], description: str,
                          template_body: str | None = None) -> str | None:
        """Start an UPDATE change set (the stack's own template unless `template_body`); its id.

        None when CloudFormation refuses it at once for changing nothing; AWS itself usually
        accepts it and marks the change set FAILED instead (see `describe_change_set`).
        """
        template: dict[str, Any] = {"TemplateBody": template_body} if template_body else {"UsePreviousTemplate": True}
        with mapped_errors(f"cloudformation:CreateChangeSet {stack}", region):
            try:
                return self.client("cloudformation", region).create_change_set(
                    StackName=stack, ChangeSetName=name, ChangeSetType="UPDATE", Parameters=list(parameters),
                    Capabilities=list(capabilities), Description=description, **template,
                )["Id"]
            except ClientError as exc:
                error = exc.response.get("Error", {})  # a ValidationError refusing an update that changes nothing
                if error.get("Code") == "ValidationError" and "No updates are to be performed" in str(error.get("Message")):
                    return None
                raise

    def describe_change_set(self, stack: str, region: str, change_set: str) -> results.ChangeSet:
        """Status, reason and every change of a change set (all pages)."""
        client = self.client("cloudformation", region)
        with mapped_errors(f"cloudformation:DescribeChangeSet {change_set}", region):
            first = page = client.describe_change_set(StackName=stack, ChangeSetName=change_set)
            changes = list(page.get("Changes", []))
            while page.get("NextToken"):
                page = client.describe_change_set(StackName=stack, ChangeSetName=change_set, NextToken=page["NextToken"])
                changes += page.get("Changes", [])
        return results.parse_change_set({**first, "Changes": changes})

    def execute_change_set(self, stack: str, region: str, change_set: str, *, token: str) -> None:
        with mapped_errors(f"cloudformation:ExecuteChangeSet {change_set}", region):
            self.client("cloudformation", region).execute_change_set(
                StackName=stack, ChangeSetName=change_set, ClientRequestToken=token
            )

    def delete_change_set(self, stack: str, region: str, change_set: str) -> None:
        with mapped_errors(f"cloudformation:DeleteChangeSet {change_set}", region):
            self.client("cloudformation", region).delete_change_set(StackName=stack, ChangeSetName=change_set)

    def latest_stack_event(self, name: str, region: str) -> results.StackEvent | None:
        """The stack's newest event (one page read), or None."""
        with mapped_errors(f"cloudformation:DescribeStackEvents {name}", region):
            events = self.client("cloudformation", region).describe_stack_events(StackName=name).get("StackEvents", [])
        return results.parse_stack_event(events[0]) if events else None

    def stack_events_since(self, name: str, region: str, event_id: str | None) -> list[results.StackEvent]:
        """The stack's events newer than `event_id` (all when None), newest first; paging stops there."""
        found: list[results.StackEvent] = []
        with mapped_errors(f"cloudformation:DescribeStackEvents {name}", region):
            pages = self.client("cloudformation", region).get_paginator("describe_stack_events").paginate(StackName=name)
            for page in pages:
                for event in page.get("StackEvents", []):
                    if event_id is not None and event.get("EventId") == event_id:
                        return found
                    found.append(results.parse_stack_event(event))
        return found
